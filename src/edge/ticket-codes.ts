import { createHash, sign } from 'node:crypto'
import { CompactSign } from 'jose'
import type { EdgeKeys } from './edge-keys.js'

/**
 * The payload of a ticket code (the content of its QR code), with one-letter names to keep the code
 * small: event id, transfer uid, ticket type uid, code version, validity window (seconds).
 */
export interface TicketCodeClaims {
  e: number
  t: string
  k: string
  n: number
  nbf: number
  exp: number
}

export interface IssuedCode {
  code: string
  /** The signing input, `header.payload`: what the transfer keeps. */
  body: string
  digest: string
}

/**
 * The JOSE `typ` of ticket codes. The edge key also signs offline tokens (`typ: "wb-offline+jwt"`,
 * tokens/jwt.ts): the header tells them apart, so a code never verifies as a token nor a token as a
 * code. Codes issued before this header existed have none; scanners accept that too.
 */
export const TICKET_CODE_TYP = 'wb-ticket'

/** A code stays valid two days past the later of its ticket date and its issue. */
const GRACE_SECONDS = 2 * 86_400

/**
 * The digest scanners hold instead of the codes: the first 128 bits of SHA-256 of the code, base64url.
 * A stolen scanner's state then admits nobody, while a scanner matches a presented code by one hash.
 */
export function codeDigest(code: string): string {
  return createHash('sha256').update(code).digest('base64url').slice(0, 22)
}

/**
 * Ticket codes are compact JWS (RFC 7515) signed with the edge key (EdDSA, Ed25519): any JOSE library
 * checks them, the key id travels in the header, and the code is about 300 characters, a QR code of
 * version 10 to 13. A transfer keeps only the signing input of its code; the signature is made again
 * on each read (Ed25519 signatures are deterministic, so it is the same code every time until the key
 * rotates), and a copy of the database admits nobody.
 */
export class TicketCodes {
  constructor(private readonly deps: { keys: EdgeKeys }) {}

  get enabled(): boolean {
    return this.deps.keys.signing !== undefined
  }

  /** Signs the code of one version of a transfer; null without a signing key. */
  async issue(input: {
    eventId: number
    transferUid: string
    ticketUid: string
    version: number
    issuedAt: number
    ticketDate: string
  }): Promise<IssuedCode | null> {
    const key = this.deps.keys.signing
    if (!key) return null
    const nbf = Math.floor(input.issuedAt / 1000)
    // The ticket date is the event's local time; read as UTC it is at most 14 hours off, which the
    // two days of grace absorb.
    const date = Math.floor(Date.parse(`${input.ticketDate}Z`) / 1000)
    const claims: TicketCodeClaims = {
      e: input.eventId,
      t: input.transferUid,
      k: input.ticketUid,
      n: input.version,
      nbf,
      exp: Math.max(Number.isFinite(date) ? date : nbf, nbf) + GRACE_SECONDS,
    }
    const code = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: TICKET_CODE_TYP })
      .sign(key.privateKey)
    return { code, body: code.slice(0, code.lastIndexOf('.')), digest: codeDigest(code) }
  }

  /**
   * The code of a stored signing input. Signed by the current key only: a code made under it comes back
   * byte for byte (Ed25519 is deterministic); one made under an earlier key (a rotation) comes back with
   * the same claims under the current key, so earlier keys in EDGE_PREVIOUS_KEYS only verify (the old code
   * itself still scans while its key is published). Null when the transfer has no code (made before ticket
   * codes) or the service has no signing key.
   */
  render(body: string | null): string | null {
    const key = this.deps.keys.signing
    if (body === null || !key) return null
    const dot = body.indexOf('.')
    let kid: unknown
    try {
      kid = JSON.parse(Buffer.from(body.slice(0, dot), 'base64url').toString()).kid
    } catch {
      return null
    }
    const input =
      kid === key.kid
        ? body
        : `${Buffer.from(JSON.stringify({ alg: 'EdDSA', kid: key.kid, typ: TICKET_CODE_TYP })).toString('base64url')}${body.slice(dot)}`
    return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`
  }
}
