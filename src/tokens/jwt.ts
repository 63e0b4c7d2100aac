import { createHash } from 'node:crypto'
import { createSigner, createVerifier } from 'fast-jwt'
import type { Clock } from '../platform/clock.js'
import { randomToken } from '../platform/random.js'
import { traced } from '../platform/tracing.js'
import type { Claims } from './claims.js'

export interface JwtOptions {
  secret: string
  /** Earlier secrets that still verify but never sign (rotation). */
  previousSecrets: string[]
  audience: string
  issuer: string
  clock: Clock
  /**
   * The Ed25519 edge key (edge/edge-keys.ts): with `signOffline` (OFFLINE_TOKEN_ALG=EdDSA) offline
   * tokens are signed with it (the current key only, `typ` EDGE_OFFLINE_TYP) so a device can check them
   * with the JWK Set; its public keys then verify EdDSA tokens, which are accepted as offline tokens of
   * that `typ` only. Without `signOffline` no EdDSA token verifies.
   */
  edge?: {
    signing?: { kid: string; privateKeyPem: string }
    verifying: { kid: string; publicKeyPem: string }[]
    signOffline: boolean
  }
}

/** A short key id derived from the secret, so a verifier picks the right key without trying each. */
export function keyId(secret: string): string {
  return createHash('sha256').update(`wristband-kid:${secret}`).digest('base64url').slice(0, 16)
}

type VerifyFn = (token: string) => Claims

/**
 * The JOSE `typ` of offline tokens signed with the edge key. The edge key also signs ticket codes
 * (`typ: "wb-ticket"`, edge/ticket-codes.ts); the header tells the two apart, so a code never verifies as
 * a token and a token never as a code (RFC 8725, explicit typing).
 */
export const EDGE_OFFLINE_TYP = 'wb-offline+jwt'
/**
 * What EdDSA offline tokens of the release before carried (fast-jwt's default); accepted while such tokens
 * can be alive (OFFLINE_TOKEN_EXPIRE_HOURS after the upgrade). TODO: drop in the next release.
 */
const LEGACY_OFFLINE_TYP = 'JWT'

/** Tokens whose check is remembered; the oldest entry goes first. */
const CHECKED_ENTRIES = 10_000
/** Longer tokens are checked every time, so the cache holds at most about 20 MB of token text. */
const CHECKED_MAX_LENGTH = 2048

/**
 * HS256 JWT encoding with `aud`/`iss` asserted. The algorithm is pinned: `none`, HS384/HS512 and
 * asymmetric algorithms are refused whatever the header says, and header fields such as `jku` are
 * ignored. Expiry is checked against the injected clock so tests can move time.
 */
export class JwtCodec {
  private readonly sign: (payload: Record<string, unknown>) => string
  private readonly verifiers = new Map<string, VerifyFn>()
  private readonly checked = new Map<string, Claims | null>()
  private readonly currentKid: string
  private readonly edgeSign: ((payload: Record<string, unknown>) => string) | undefined
  /** Per edge key id: the claims of a good offline token, null for any other type (the edge key signs offline tokens only). */
  private readonly edgeVerifiers = new Map<string, (token: string) => Claims | null>()

  constructor(private readonly opts: JwtOptions) {
    this.currentKid = keyId(opts.secret)
    this.sign = createSigner({ key: opts.secret, algorithm: 'HS256', kid: this.currentKid })
    const edge = opts.edge
    this.edgeSign =
      edge?.signOffline && edge.signing
        ? createSigner({
            key: edge.signing.privateKeyPem,
            algorithm: 'EdDSA',
            kid: edge.signing.kid,
            header: { alg: 'EdDSA', typ: EDGE_OFFLINE_TYP },
          })
        : undefined
    // EdDSA offline tokens are accepted only while OFFLINE_TOKEN_ALG=EdDSA: with HS256 the edge key signs
    // ticket codes alone, and nothing it signed is a token.
    for (const k of edge?.signOffline ? edge.verifying : []) {
      const verify = createVerifier({
        key: k.publicKeyPem,
        algorithms: ['EdDSA'],
        allowedAud: opts.audience,
        allowedIss: opts.issuer,
        requiredClaims: ['type', 'sub', 'jti', 'iat', 'exp', 'aud', 'iss'],
        ignoreExpiration: true,
        ignoreNotBefore: true,
      }) as VerifyFn
      // The edge key signs offline tokens only: an EdDSA token of any other type is refused.
      this.edgeVerifiers.set(k.kid, (token) => {
        const claims = verify(token)
        return claims.type === 'offline' ? claims : null
      })
    }
    for (const secret of [opts.secret, ...opts.previousSecrets]) {
      this.verifiers.set(
        keyId(secret),
        createVerifier({
          key: secret,
          algorithms: ['HS256'],
          allowedAud: opts.audience,
          allowedIss: opts.issuer,
          // fast-jwt checks allowedAud/allowedIss only when the claim is present: require both.
          requiredClaims: ['type', 'sub', 'jti', 'iat', 'exp', 'aud', 'iss'],
          // Expiry is checked in tryVerify against the injected clock, so every outcome here
          // (signature, format, alg, aud, iss, claims present) belongs to the token string alone and
          // tryVerify can remember it.
          ignoreExpiration: true,
          ignoreNotBefore: true,
        }) as VerifyFn,
      )
    }
  }

  /** Signs claims; adds jti, iat, exp, aud and iss. `lifetimeSeconds` sets exp. */
  issue<T extends Record<string, unknown>>(
    claims: T,
    lifetimeSeconds: number,
  ): { token: string; claims: Claims } {
    const iat = Math.floor(this.opts.clock.now() / 1000)
    const full = {
      ...claims,
      jti: randomToken(18),
      iat,
      exp: iat + lifetimeSeconds,
      aud: this.opts.audience,
      iss: this.opts.issuer,
    } as unknown as Claims
    const offline = claims.type === 'offline' && this.edgeSign !== undefined
    const sign = offline && this.edgeSign ? this.edgeSign : this.sign
    const token = traced(
      'token.sign',
      { 'token.type': String(claims.type ?? 'access'), 'token.alg': offline ? 'EdDSA' : 'HS256' },
      () => sign(full as unknown as Record<string, unknown>),
    )
    return { token, claims: full }
  }

  /**
   * The claims of a good token, or null. The hot path of POST /tokens/verify: a refusal builds no
   * error object.
   *
   * The outcome of the signature and claim checks is remembered per token string (the token itself is
   * the key: fast-jwt's own cache hashes every token with SHA-256 first, which cost as much as the HMAC
   * it saves). Only outcomes that belong to the string are remembered: expiry and not-before are
   * checked on every call against the clock, and revocation is the caller's, so a cached answer never
   * outlives the token's `exp` or a revocation.
   */
  tryVerify(token: string): Claims | null {
    let claims = this.checked.get(token)
    if (claims === undefined) {
      claims = this.check(token)
      if (token.length <= CHECKED_MAX_LENGTH) {
        if (this.checked.size >= CHECKED_ENTRIES) this.checked.delete(this.checked.keys().next().value!)
        this.checked.set(token, claims)
      }
    }
    if (claims === null) return null
    const now = this.opts.clock.now() / 1000
    if (typeof claims.exp !== 'number' || claims.exp <= now) return null
    if (typeof claims.nbf === 'number' && claims.nbf > now) return null
    return claims
  }

  /** Signature, algorithm, format, `aud`, `iss` and the required claims: all properties of the string. */
  private check(token: string): Claims | null {
    try {
      return this.verifierFor(token)(token)
    } catch {
      // Only a token the HS256 keys refused is tried against the edge keys, so HS256 pays nothing.
      return this.edgeVerifiers.size ? this.checkEdge(token) : null
    }
  }

  private checkEdge(token: string): Claims | null {
    try {
      const header = headerOf(token)
      if (header?.typ !== EDGE_OFFLINE_TYP && header?.typ !== LEGACY_OFFLINE_TYP) return null
      const verify = this.edgeVerifiers.get(header.kid as string)
      return verify ? verify(token) : null
    } catch {
      return null
    }
  }

  private verifierFor(token: string): VerifyFn {
    // With a single key there is nothing to choose; skip decoding the header.
    if (this.verifiers.size === 1) return this.verifiers.get(this.currentKid)!
    const kid = headerKid(token)
    return (typeof kid === 'string' && this.verifiers.get(kid)) || this.verifiers.get(this.currentKid)!
  }
}

function headerOf(token: string): Record<string, unknown> | undefined {
  try {
    const header: unknown = JSON.parse(
      Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString(),
    )
    return typeof header === 'object' && header !== null ? (header as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

function headerKid(token: string): unknown {
  return headerOf(token)?.kid
}
