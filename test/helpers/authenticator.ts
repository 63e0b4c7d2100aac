import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto'
import { cose, isoCBOR } from '@simplewebauthn/server/helpers'

/**
 * A software WebAuthn authenticator: real attestation objects (format `none`) and assertions, signed
 * with its own P-256 keys, so the service's checks run on what a browser would send. Each option bends
 * one rule a real authenticator keeps (origin, RP ID, user verification, counter), for refusal tests.
 */
export interface Ceremony {
  /** The page's origin, as the browser writes it into clientDataJSON. */
  origin?: string
  /** The RP ID whose hash the authenticator data carries. */
  rpId?: string
  /** User verification (UV flag); true unless a test says otherwise. */
  userVerified?: boolean
  /** Replaces the challenge of the options (a replayed or foreign one). */
  challenge?: string
}

interface StoredCredential {
  id: Buffer
  key: KeyObject
  cosePublicKey: Uint8Array
  userHandle: string
  counter: number
}

const FLAG_UP = 0x01
const FLAG_UV = 0x04
const FLAG_AT = 0x40

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest()
const b64url = (data: Buffer | Uint8Array) => Buffer.from(data).toString('base64url')

export class SoftAuthenticator {
  readonly credentials: StoredCredential[] = []

  constructor(
    readonly origin: string,
    readonly rpId: string,
  ) {}

  /** Answers `navigator.credentials.create()` options (their JSON form) with a new credential. */
  register(options: { challenge: string; user: { id: string } }, c: Ceremony = {}) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const jwk = publicKey.export({ format: 'jwk' })
    const cosePublicKey = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [cose.COSEKEYS.kty, cose.COSEKTY.EC2],
        [cose.COSEKEYS.alg, cose.COSEALG.ES256],
        [cose.COSEKEYS.crv, cose.COSECRV.P256],
        [cose.COSEKEYS.x, Buffer.from(jwk.x!, 'base64url')],
        [cose.COSEKEYS.y, Buffer.from(jwk.y!, 'base64url')],
      ]),
    )
    const id = randomBytes(32)
    const credential: StoredCredential = {
      id,
      key: privateKey,
      cosePublicKey,
      userHandle: options.user.id,
      counter: 0,
    }
    const idLength = Buffer.alloc(2)
    idLength.writeUInt16BE(id.length)
    const attested = Buffer.concat([Buffer.alloc(16), idLength, id, Buffer.from(cosePublicKey)])
    const authData = this.authData(c, FLAG_AT, 0, attested)
    const clientDataJSON = this.clientData('webauthn.create', options.challenge, c)
    const attestationObject = isoCBOR.encode(
      new Map<string, string | Map<string, string> | Uint8Array>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', authData],
      ]),
    )
    this.credentials.push(credential)
    return {
      id: b64url(id),
      rawId: b64url(id),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(clientDataJSON),
        attestationObject: b64url(attestationObject),
        transports: ['internal'],
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    }
  }

  /**
   * Answers `navigator.credentials.get()` options with an assertion of one of its credentials (the
   * first one the options allow, or `credential`); `counter` sets the signature counter sent (a
   * clone's older one), else it grows by one.
   */
  assert(
    options: { challenge: string; allowCredentials?: { id: string }[] },
    c: Ceremony & { credential?: StoredCredential; counter?: number } = {},
  ) {
    const allowed = options.allowCredentials?.map((a) => a.id)
    const credential =
      c.credential ??
      this.credentials.find((cr) => !allowed || allowed.length === 0 || allowed.includes(b64url(cr.id)))
    if (!credential) throw new Error('the soft authenticator holds no credential the options allow')
    const counter = c.counter ?? credential.counter + 1
    credential.counter = Math.max(credential.counter, counter)
    const authData = this.authData(c, 0, counter)
    const clientDataJSON = this.clientData('webauthn.get', options.challenge, c)
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.key)
    return {
      id: b64url(credential.id),
      rawId: b64url(credential.id),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        userHandle: credential.userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    }
  }

  private authData(c: Ceremony, flags: number, counter: number, attested?: Buffer): Buffer {
    const uv = c.userVerified === false ? 0 : FLAG_UV
    const head = Buffer.alloc(37)
    sha256(c.rpId ?? this.rpId).copy(head, 0)
    head.writeUInt8(FLAG_UP | uv | flags, 32)
    head.writeUInt32BE(counter, 33)
    return attested ? Buffer.concat([head, attested]) : head
  }

  private clientData(type: string, challenge: string, c: Ceremony): Buffer {
    return Buffer.from(
      JSON.stringify({
        type,
        challenge: c.challenge ?? challenge,
        origin: c.origin ?? this.origin,
        crossOrigin: false,
      }),
    )
  }
}
