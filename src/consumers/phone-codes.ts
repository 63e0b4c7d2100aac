import { randomInt, timingSafeEqual } from 'node:crypto'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { TooManyRequestsError } from '../platform/errors.js'
import { hmacHex } from '../platform/keys.js'
import { codeTimesSince, consumeCode, countTry, findLatestCode, replaceCode } from './phone-codes.store.js'

/** `login`: phone sign-in OTP; `verify`: phone-ownership check before registration. */
export type CodePurpose = 'login' | 'verify'

export const CODE_LIFETIME_MS = 5 * 60_000
export const MAX_WRONG_TRIES = 5
/**
 * Codes per phone and purpose per rolling hour. With five tries per code this bounds guessing to 25
 * attempts an hour on one number however many addresses an attacker uses, and limits SMS pumping.
 */
export const CODES_PER_HOUR = 5
const HOUR_MS = 60 * 60_000
const KEEP_MS = 24 * HOUR_MS

/**
 * Single-use 6-digit codes sent by SMS. Only an HMAC of the code is stored: a plain hash of a
 * 6-digit code is reversed by trying all million values, but without the key (derived from the
 * signing secret) a copy of the database reveals nothing.
 */
export class PhoneCodes {
  constructor(private readonly deps: { db: Db; clock: Clock; key: Buffer }) {}

  private hash(purpose: CodePurpose, phone: string, code: string): string {
    return hmacHex(this.deps.key, `${purpose}:${phone}:${code}`)
  }

  /** A new code for the phone; earlier live codes of the same purpose stop working. */
  async issue(purpose: CodePurpose, phone: string): Promise<string> {
    const { db, clock } = this.deps
    const now = clock.now()
    const recent = await codeTimesSince(db, phone, purpose, now - HOUR_MS)
    if (recent.length >= CODES_PER_HOUR) {
      const oldest = recent[0]!
      throw new TooManyRequestsError(
        CODES_PER_HOUR,
        Math.max(1, Math.ceil((oldest + HOUR_MS - now) / 1000)),
        'Too many codes requested for this phone number',
      )
    }
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0')
    // The old codes end and the new one starts together.
    await db.transaction().execute((tx) =>
      replaceCode(
        tx,
        {
          purpose,
          phone,
          code_hash: this.hash(purpose, phone, code),
          expires_at: now + CODE_LIFETIME_MS,
          created_at: now,
        },
        now - KEEP_MS,
      ),
    )
    return code
  }

  /**
   * Whether `code` is the phone's live code, consuming it. Each try is counted before the code is
   * compared, by one conditional write, so that of any number of simultaneous tries at most
   * MAX_WRONG_TRIES are compared; after that many the code is dead. Of concurrent correct attempts
   * exactly one gets true: the consuming UPDATE is conditional on the code still being live.
   */
  async consume(purpose: CodePurpose, phone: string, code: string): Promise<boolean> {
    const { db, clock } = this.deps
    const now = clock.now()
    const row = await findLatestCode(db, phone, purpose)
    if (!row || row.expires_at <= now || row.attempts >= MAX_WRONG_TRIES) return false
    if (!(await countTry(db, row.id, now, MAX_WRONG_TRIES))) return false
    const given = Buffer.from(this.hash(purpose, phone, code), 'hex')
    const stored = Buffer.from(row.code_hash, 'hex')
    if (given.length !== stored.length || !timingSafeEqual(given, stored)) return false
    return consumeCode(db, row.id, now)
  }
}
