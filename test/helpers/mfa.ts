import assert from 'node:assert/strict'
import { generateSync } from 'otplib'
import { login, type TestApp } from './app.js'

const STEP_MS = 30_000

/**
 * A code of `secret` from a time step never used before: the clock moves to just after the next step
 * boundary, so the code is neither a replay of an earlier one nor ages out before the service checks it.
 * The code comes from otplib, an implementation independent of the service's (otpauth).
 */
export function nextCode(t: TestApp, secret: string): string {
  t.clock.advance(STEP_MS - (t.clock.now() % STEP_MS) + 100)
  return generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
}

/** A token pair whose access token carries a fresh `mfa_verified_at`. */
export async function freshMfaTokens(
  t: TestApp,
  email: string,
  secret: string,
): Promise<{ access_token: string; refresh_token: string }> {
  const { access_token } = await login(t, email)
  const res = await t.request({
    method: 'POST',
    url: '/admin/mfa/verify',
    token: access_token,
    payload: { code: nextCode(t, secret) },
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

/** Switches MFA on for an administrator through the API (setup, then a code); returns the secret. */
export async function enrolMfa(t: TestApp, email: string): Promise<string> {
  const { access_token } = await login(t, email)
  const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: access_token })
  assert.equal(setup.statusCode, 200, setup.body)
  const { secret } = setup.json() as { secret: string }
  await freshMfaTokens(t, email, secret)
  return secret
}
