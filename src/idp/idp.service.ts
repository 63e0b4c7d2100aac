import type { AuditLog } from '../audit/audit.store.js'
import { customerGeneration, customersWithProvenEmail, insertCustomer } from '../consumers/consumers.store.js'
import { consumerGrant } from '../identities/grants.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'
import { findLinkedCustomer, insertIdentity, linkedToIssuer, touchIdentity } from './idp.store.js'
import type { IdpVerifier, ProviderIdentity } from './idp.verifier.js'

export interface IdpLoginDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  verifier: IdpVerifier
  authEvents: AuthEvents
}

/**
 * The oldest consumer with this proven e-mail address that has no other account of the same provider
 * linked. Self-asserted addresses never match: otherwise anyone could register with a victim's address
 * and be handed the victim's provider sign-in.
 */
async function consumerByProvenEmail(db: Db, email: string, issuer: string): Promise<number | null> {
  const candidates = await customersWithProvenEmail(db, email)
  const taken = await linkedToIssuer(db, candidates, issuer)
  return candidates.find((id) => !taken.has(id)) ?? null
}

/**
 * docs/specification.md: the consumer linked to (issuer, subject); else the one with the same e-mail when
 * the provider vouches for it; else a new consumer. The link is made in one transaction with the
 * consumer it may create, so of two first sign-ins at once one links and the other finds the link.
 */
async function linkOrCreate(deps: IdpLoginDeps, who: ProviderIdentity): Promise<{ id: number; how: string }> {
  const { db, clock } = deps
  for (let attempt = 0; ; attempt++) {
    const now = clock.now()
    const linked = await findLinkedCustomer(db, who.issuer, who.subject)
    if (linked !== null) {
      await touchIdentity(db, who.issuer, who.subject, now)
      return { id: linked, how: 'linked' }
    }
    try {
      return await db.transaction().execute(async (tx) => {
        const byEmail = who.emailVerified ? await consumerByProvenEmail(tx, who.email!, who.issuer) : null
        const id =
          byEmail ??
          (await insertCustomer(tx, {
            phone: null,
            password_hash: null,
            email: who.email,
            email_self_asserted: who.emailVerified ? 0 : 1,
            first_name: who.givenName,
            last_name: who.familyName,
            created_at: now,
          }))
        await insertIdentity(tx, {
          customer_id: id,
          issuer: who.issuer,
          subject: who.subject,
          email: who.email,
          now,
        })
        return { id, how: byEmail === null ? 'created' : 'linked_by_email' }
      })
    } catch (err) {
      if (!isUniqueViolation(err) || attempt > 0) throw err
    }
  }
}

export function loginWithIdp(deps: IdpLoginDeps, idToken: string, ip: string): Promise<TokenResponse> {
  return counted(deps.authEvents, 'login_idp', () => signInWithIdp(deps, idToken, ip))
}

async function signInWithIdp(deps: IdpLoginDeps, idToken: string, ip: string): Promise<TokenResponse> {
  const who = await deps.verifier.verify(idToken)
  const { id, how } = await linkOrCreate(deps, who)
  await deps.audit.record({
    kind: 'login_idp',
    actor: `consumer:${id}`,
    ip,
    outcome: 'success',
    detail: { issuer: who.issuer, how },
  })
  const generation = (await customerGeneration(deps.db, id)) ?? 0
  return deps.tokens.issuePair(consumerGrant({ id, token_generation: generation }))
}
