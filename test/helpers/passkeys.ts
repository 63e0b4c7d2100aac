import assert from 'node:assert/strict'
import type { TestApp } from './app.js'
import { type Ceremony, SoftAuthenticator } from './authenticator.js'

/** The relying party the passkey tests configure (a name that resolves nowhere: no browser is involved). */
export const RP_ID = 'wristband.test'
export const ORIGIN = 'https://wristband.test'
export const PASSKEY_ENV = { WEBAUTHN_RP_ID: RP_ID, WEBAUTHN_ORIGINS: ORIGIN }

export function softAuthenticator(): SoftAuthenticator {
  return new SoftAuthenticator(ORIGIN, RP_ID)
}

/**
 * Registers a passkey of `authenticator` through the API with `token`; answers the stored passkey. The
 * account's `password` goes with it (a first passkey needs it; the test accounts' by default; null: none).
 */
export async function registerPasskey(
  t: TestApp,
  token: string,
  authenticator: SoftAuthenticator,
  c: Ceremony = {},
  name?: string,
  password: string | null = 's3cret-pass',
) {
  const opts = await t.request({ method: 'POST', url: '/admin/passkeys/registration/options', token })
  assert.equal(opts.statusCode, 200, opts.body)
  const { flow, options } = opts.json()
  const response = authenticator.register(options, c)
  return t.request({
    method: 'POST',
    url: '/admin/passkeys/registration',
    token,
    payload: { flow, response, ...(name ? { name } : {}), ...(password === null ? {} : { password }) },
  })
}

/** `/auth/passkey/options` then an assertion of `authenticator` at `/auth/passkey` (`token`: second factor). */
export async function passkeySignIn(
  t: TestApp,
  authenticator: SoftAuthenticator,
  c: Parameters<SoftAuthenticator['assert']>[1] = {},
  token?: string,
) {
  const opts = await t.request({ method: 'POST', url: '/auth/passkey/options', token })
  assert.equal(opts.statusCode, 200, opts.body)
  const { flow, options } = opts.json()
  const response = authenticator.assert(options, c)
  const res = await t.request({ method: 'POST', url: '/auth/passkey', token, payload: { flow, response } })
  return Object.assign(res, { flow, options, response })
}

/** The audit entries of `kind` for `actor`, oldest first, with their parsed detail. */
export async function auditOf(t: TestApp, kind: string, actor?: string) {
  let q = t.db.db.selectFrom('audit_log').select(['actor', 'outcome', 'detail']).where('kind', '=', kind)
  if (actor) q = q.where('actor', '=', actor)
  const rows = await q.orderBy('id').execute()
  return rows.map((r) => ({ actor: r.actor, outcome: r.outcome, detail: JSON.parse(r.detail ?? '{}') }))
}
