import type { Selectable } from 'kysely'
import type { Db } from '../platform/db/database.js'
import type { PasskeysTable, WebauthnChallengesTable } from '../platform/db/schema.js'

/** The kinds of account that may hold passkeys: the dashboard's. */
export type PasskeyKind = 'admin' | 'dashboard_user' | 'network_manager'

export type PasskeyRow = Selectable<PasskeysTable>
export type ChallengeRow = Selectable<WebauthnChallengesTable>

export interface Subject {
  kind: PasskeyKind
  id: number
}

export async function listPasskeys(db: Db, subject: Subject): Promise<PasskeyRow[]> {
  return db
    .selectFrom('passkeys')
    .selectAll()
    .where('subject_kind', '=', subject.kind)
    .where('subject_id', '=', subject.id)
    .orderBy('id')
    .execute()
}

export async function countPasskeys(db: Db, subject: Subject): Promise<number> {
  const r = await db
    .selectFrom('passkeys')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('subject_kind', '=', subject.kind)
    .where('subject_id', '=', subject.id)
    .executeTakeFirstOrThrow()
  return Number(r.n)
}

export async function findPasskeyByCredentialId(
  db: Db,
  credentialId: string,
): Promise<PasskeyRow | undefined> {
  return db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId).executeTakeFirst()
}

export async function insertPasskey(db: Db, row: Omit<PasskeyRow, 'id' | 'last_used_at'>): Promise<number> {
  const r = await db.insertInto('passkeys').values(row).returning('id').executeTakeFirstOrThrow()
  return r.id
}

/**
 * Records a sign-in's counter, only if the stored one is still the one the check was made against:
 * of two sign-ins with one assertion (or two clones at once) one wins.
 */
export async function advanceCounter(
  db: Db,
  id: number,
  from: number,
  to: number,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('passkeys')
    .set({ counter: to, last_used_at: now })
    .where('id', '=', id)
    .where('counter', '=', from)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/** Removes one passkey of an account; false when the account has none with that id. */
export async function deletePasskey(db: Db, subject: Subject, id: number): Promise<PasskeyRow | undefined> {
  return db
    .deleteFrom('passkeys')
    .where('id', '=', id)
    .where('subject_kind', '=', subject.kind)
    .where('subject_id', '=', subject.id)
    .returningAll()
    .executeTakeFirst()
}

/** Removes every passkey of an account (break-glass reset); answers how many. */
export async function deletePasskeysOf(db: Db, subject: Subject): Promise<number> {
  const rows = await db
    .deleteFrom('passkeys')
    .where('subject_kind', '=', subject.kind)
    .where('subject_id', '=', subject.id)
    .returning('id')
    .execute()
  return rows.length
}

export async function insertChallenge(db: Db, row: ChallengeRow): Promise<void> {
  await db.deleteFrom('webauthn_challenges').where('expires_at', '<=', row.created_at).execute()
  await db.insertInto('webauthn_challenges').values(row).execute()
}

/**
 * Takes the challenge of a flow: the row is deleted in the same statement that reads it, so a
 * challenge is answered once, whatever the answer; undefined when there is none (unknown, used).
 */
export async function takeChallenge(db: Db, flowHash: string): Promise<ChallengeRow | undefined> {
  return db
    .deleteFrom('webauthn_challenges')
    .where('flow_hash', '=', flowHash)
    .returningAll()
    .executeTakeFirst()
}
