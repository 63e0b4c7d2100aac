import { createRemoteJWKSet, decodeJwt, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose'
import type { Clock } from '../platform/clock.js'
import type { IdpIssuer } from '../platform/config.js'
import { ServiceUnavailableError, UnauthorizedError } from '../platform/errors.js'

/** What the service takes from a verified ID token. */
export interface ProviderIdentity {
  issuer: string
  subject: string
  email: string | null
  /** The provider vouches that the subject controls `email`. */
  emailVerified: boolean
  givenName: string | null
  familyName: string | null
}

export interface IdpVerifierOptions {
  issuers: readonly IdpIssuer[]
  clock: Clock
  /** Least time between two key-set fetches for one provider (an unknown `kid` triggers one). */
  cooldownMs: number
  timeoutMs: number
}

/** A provider's key set or discovery document could not be fetched or read. */
class ProviderUnavailable extends Error {}

/** Allowed clock difference between this service and a provider for `exp`, `nbf` and `iat`. */
const CLOCK_TOLERANCE_SECONDS = 30
const ALGORITHMS = ['RS256', 'ES256']

function stringClaim(payload: JWTPayload, name: string, max: number): string | null {
  const v = payload[name]
  return typeof v === 'string' && v.length > 0 && v.length <= max ? v : null
}

/**
 * Verifies ID tokens of the configured identity providers: signature by a key of the issuer's key
 * set (RS256 or ES256 only), `iss`, `aud`, `exp`, `nbf`. Key sets are fetched lazily, from
 * `jwks_uri` or found by OpenID discovery, cached, and fetched again when a token names an unknown
 * `kid` (key rotation), at most once per cooldown.
 */
export class IdpVerifier {
  private readonly keySets = new Map<string, Promise<JWTVerifyGetKey>>()

  constructor(private readonly opts: IdpVerifierOptions) {}

  async verify(idToken: string): Promise<ProviderIdentity> {
    let unverified: JWTPayload
    try {
      unverified = decodeJwt(idToken)
    } catch {
      throw new UnauthorizedError('Invalid ID token')
    }
    const config = this.opts.issuers.find((i) => i.issuer === unverified.iss)
    if (!config) throw new UnauthorizedError('Invalid ID token')
    let payload: JWTPayload
    try {
      const keys = await this.keySetFor(config)
      ;({ payload } = await jwtVerify(idToken, keys, {
        issuer: config.issuer,
        audience: config.audience,
        algorithms: ALGORITHMS,
        currentDate: new Date(this.opts.clock.now()),
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['sub', 'exp', 'iat'],
      }))
    } catch (err) {
      if (err instanceof ProviderUnavailable)
        throw new ServiceUnavailableError('The identity provider could not be reached')
      if (err instanceof errors.JOSEError) throw new UnauthorizedError('Invalid ID token')
      throw err
    }
    const subject = stringClaim(payload, 'sub', 255)
    if (!subject) throw new UnauthorizedError('Invalid ID token')
    const email = stringClaim(payload, 'email', 254)?.toLowerCase() ?? null
    // Some providers send email_verified as the string "true".
    const verified = payload.email_verified === true || payload.email_verified === 'true'
    return {
      issuer: config.issuer,
      subject,
      email,
      emailVerified: email !== null && verified,
      givenName: stringClaim(payload, 'given_name', 100),
      familyName: stringClaim(payload, 'family_name', 100),
    }
  }

  private keySetFor(config: IdpIssuer): Promise<JWTVerifyGetKey> {
    let keys = this.keySets.get(config.issuer)
    if (!keys) {
      keys = this.createKeySet(config)
      this.keySets.set(config.issuer, keys)
      // A failed discovery is not cached: the next sign-in tries again.
      keys.catch(() => this.keySets.delete(config.issuer))
    }
    return keys
  }

  private async createKeySet(config: IdpIssuer): Promise<JWTVerifyGetKey> {
    const uri = config.jwks_uri ?? (await this.discoverJwksUri(config.issuer))
    const remote = createRemoteJWKSet(new URL(uri), {
      timeoutDuration: this.opts.timeoutMs,
      cooldownDuration: this.opts.cooldownMs,
    })
    return async (header, token) => {
      try {
        return await remote(header, token)
      } catch (err) {
        // No key for the token's kid (also after a refetch) is the token's fault; the rest is the provider's.
        if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys)
          throw err
        throw new ProviderUnavailable('key set unavailable', { cause: err })
      }
    }
  }

  /** OpenID Connect Discovery 1.0: the document must name the configured issuer exactly (§4.3). */
  private async discoverJwksUri(issuer: string): Promise<string> {
    const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`
    let doc: { issuer?: unknown; jwks_uri?: unknown }
    try {
      const res = await fetch(url, {
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        headers: { accept: 'application/json' },
      })
      if (res.status !== 200) throw new Error(`discovery answered ${res.status}`)
      doc = (await res.json()) as typeof doc
    } catch (err) {
      throw new ProviderUnavailable('discovery failed', { cause: err })
    }
    if (doc.issuer !== issuer || typeof doc.jwks_uri !== 'string' || !URL.canParse(doc.jwks_uri))
      throw new ProviderUnavailable('discovery document does not match the issuer')
    return doc.jwks_uri
  }
}
