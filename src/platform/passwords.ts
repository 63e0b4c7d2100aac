import { hash, verify } from '@node-rs/argon2'
import { verify as bcryptVerify } from '@node-rs/bcrypt'
import { traced } from './tracing.js'

// OWASP's argon2id parameters: 19 MiB, two passes, one lane. Hashing runs on libuv's thread pool.
// `algorithm: 2` is Algorithm.Argon2id (a const enum, which verbatimModuleSyntax cannot import).
const ARGON2_OPTIONS = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

export function hashPassword(password: string): Promise<string> {
  return traced('password.hash', { 'password.algorithm': 'argon2id' }, () => hash(password, ARGON2_OPTIONS))
}

export interface PasswordCheck {
  ok: boolean
  /** The stored hash is of an older kind (bcrypt) or weaker parameters and should be replaced. */
  needsRehash: boolean
}

export function checkPassword(stored: string, password: string): Promise<PasswordCheck> {
  const algorithm = stored.startsWith('$2') ? 'bcrypt' : 'argon2id'
  return traced('password.verify', { 'password.algorithm': algorithm }, () =>
    verifyPassword(stored, password),
  )
}

async function verifyPassword(stored: string, password: string): Promise<PasswordCheck> {
  try {
    if (stored.startsWith('$2')) return { ok: await bcryptVerify(password, stored), needsRehash: true }
    const ok = await verify(stored, password)
    return { ok, needsRehash: ok && !stored.startsWith('$argon2id$v=19$m=19456,t=2,p=1$') }
  } catch {
    return { ok: false, needsRehash: false }
  }
}

/**
 * A hash of a random password, checked when the account does not exist so that an unknown e-mail
 * costs the same time as a wrong password.
 */
export function createDummyHash(): Promise<string> {
  return hashPassword(`dummy-${Math.random()}`)
}
