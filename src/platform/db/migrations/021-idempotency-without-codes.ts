import type { Kysely } from 'kysely'

/**
 * Idempotency records keep no ticket codes (specification: "No stored copy of a response holds a
 * ticket code: replays of idempotent requests re-render it"). Until now a record of
 * `POST /companies/transfer` or `POST /companies/transfers` kept the whole answer, signed codes
 * included, for 24 hours. This rewrites the records kept so far with every `ticket_code` null; the
 * rest of each answer stays (the transfer_uid is what a replay renders the current code from).
 *
 * No schema change: the rewritten records have the shape the release before writes, so it keeps
 * running beside this one (its replay of such a record answers `ticket_code: null`; the transfer's
 * code is at `GET /companies/transfer/{id}`). The records it writes meanwhile still hold codes until
 * they expire; this release replays them with the current code and rewrites them at their first replay.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // biome-ignore lint/suspicious/noExplicitAny: a migration sees the schema of its own time, not schema.ts
  const q = db as Kysely<any>
  let after: { api_key_id: number; key: string } | undefined
  for (;;) {
    const rows: { api_key_id: number; key: string; response: string }[] = await q
      .selectFrom('idempotency_keys')
      .select(['api_key_id', 'key', 'response'])
      .where('status_code', '<', 300)
      .where('response', 'like', '%"ticket_code":"%')
      .$if(after !== undefined, (s) =>
        s.where((eb) =>
          eb.or([
            eb('api_key_id', '>', after!.api_key_id),
            eb.and([eb('api_key_id', '=', after!.api_key_id), eb('key', '>', after!.key)]),
          ]),
        ),
      )
      .orderBy('api_key_id')
      .orderBy('key')
      .limit(100)
      .execute()
    for (const r of rows)
      await q
        .updateTable('idempotency_keys')
        .set({ response: JSON.stringify(withoutCodes(JSON.parse(r.response))) })
        .where('api_key_id', '=', r.api_key_id)
        .where('key', '=', r.key)
        .execute()
    if (rows.length < 100) return
    after = rows[rows.length - 1]
  }
}

/** The stored answer with every `ticket_code` null: a transfer's answer, or each of a batch's. */
function withoutCodes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCodes)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, k === 'ticket_code' ? null : withoutCodes(v)]),
  )
}
