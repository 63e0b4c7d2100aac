import { setTimeout as sleep } from 'node:timers/promises'
import {
  type AuditCursor,
  type AuditForwardRow,
  formatCursor,
  listAuditAfter,
  listAuditNewestSettled,
  parseCursor,
  presentForward,
} from '../audit/audit.service.js'
import { CliError, integerOption, type Subcommand, stringOption } from './command.js'
import { audited, withContext } from './context.js'

// How often --follow looks for new entries: quick enough to watch an incident, light on the database.
const FOLLOW_INTERVAL_MS = 500

/**
 * Characters a terminal may act on or that change how a line reads: C0 controls (newline, ESC…), DEL,
 * C1 controls (U+009B is a one-character CSI on some terminals), the line and paragraph separators and
 * the bidirectional overrides and isolates (text that reads in another order than it is stored).
 */
const UNSAFE_CHARACTERS = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069'
const UNSAFE = new RegExp(`[${UNSAFE_CHARACTERS}]`, 'g')
/** Plain: no space, quote, backslash or unsafe character. */
const PLAIN = new RegExp(`^[^\\s"\\\\${UNSAFE_CHARACTERS}]+$`)
const escapeUnsafe = (text: string) =>
  text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

/**
 * An audited value as the plain output prints it: as it is when it is plain (no space, quote,
 * backslash or unsafe character), else as a JSON string with every unsafe character escaped, so a
 * typed e-mail can neither start a line of its own nor pass for another field (`actor=x  ip=…`).
 */
function printable(value: string): string {
  if (PLAIN.test(value)) return value
  return escapeUnsafe(JSON.stringify(value))
}

/**
 * One entry, as text or as one JSON line. Actors, addresses and details hold what clients typed (a
 * failed sign-in's e-mail): both forms escape every control character, ESC included, so the output
 * of `wristband audit` in a terminal shows them and never runs them.
 */
function formatAuditRow(row: AuditForwardRow, json: boolean): string {
  const entry = presentForward(row)
  if (json) return escapeUnsafe(JSON.stringify(entry))
  const { detail } = entry
  return [
    new Date(row.at).toISOString(),
    printable(row.kind),
    printable(row.outcome),
    `actor=${row.actor === null ? '-' : printable(row.actor)}`,
    `ip=${row.ip === null ? '-' : printable(row.ip)}`,
    detail === null ? '' : escapeUnsafe(JSON.stringify(detail)),
  ]
    .join('  ')
    .trimEnd()
}

export const auditCommand: Subcommand = {
  summary: 'Print the audit log',
  usage: `Usage: wristband audit [--follow] [--after CURSOR] [--kind KIND] [--limit N] [--json]

Prints the newest audit-log entries, oldest first, or every entry after CURSOR; with --follow keeps
printing new ones until interrupted (Ctrl-C). Entries come in the order they were committed, each once:
one whose transaction is still open waits, with those after it, until it ends. Reading the log is
itself recorded in it.

Options:
  --follow, -f         keep printing entries as they are written
  --after CURSOR       start after this cursor (0-0: the start of the log) instead of the newest
                       entries; each JSON line's "cursor" resumes after it
  --kind KIND          only entries of this kind (e.g. login_failed, cli_admin_create)
  --limit N            how many of the newest entries to print first (default 50, at most 10000)
  --json               one JSON object per line, with its cursor`,
  options: {
    follow: { type: 'boolean', short: 'f' },
    after: { type: 'string' },
    kind: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(values, loadConfig) {
    const command = 'audit'
    const kind = stringOption(values, 'kind', command, true)
    const rawLimit = stringOption(values, 'limit', command, true)
    const limit = rawLimit === undefined ? 50 : integerOption(rawLimit, 'limit', command, 1, 10_000)
    const json = Boolean(values.json)
    const rawAfter = stringOption(values, 'after', command, true)
    const after = rawAfter === undefined ? undefined : parseCursor(rawAfter)
    if (rawAfter !== undefined && after === undefined)
      throw new CliError(
        `wristband audit: --after must be a cursor such as 0-0 or one printed by --json, got "${rawAfter}"`,
        2,
      )
    if (after !== undefined && rawLimit !== undefined)
      throw new CliError('wristband audit: --after and --limit exclude each other', 2)
    // Listening for the stop signal from the start: a signal that arrives while the first page is
    // being printed must still end the follow cleanly (exit 0), not kill the process.
    const stop = new AbortController()
    if (values.follow)
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort())
    await withContext(loadConfig(), async (ctx) => {
      await audited(ctx, 'cli_audit_read', async () => ({
        detail: {
          follow: Boolean(values.follow),
          kind: kind ?? null,
          ...(after ? { after: formatCursor(after) } : { limit }),
        },
      }))
      const { db } = ctx
      const { dialect } = ctx.database
      const filter = kind === undefined ? {} : { kind }
      let last: AuditCursor = after ?? { tx: 0, id: 0 }
      const print = (rows: AuditForwardRow[]) => {
        for (const r of rows) {
          console.log(formatAuditRow(r, json))
          last = { tx: r.tx, id: r.id }
        }
        return rows.length
      }
      if (after === undefined) {
        print(await listAuditNewestSettled(db, dialect, { ...filter, limit }))
        if (!values.follow) return
      }
      for (;;) {
        // Every entry there is, a page at a time; then, following, a look every FOLLOW_INTERVAL_MS.
        const n = print(await listAuditAfter(db, dialect, { ...filter, after: last, limit: 1000 }))
        if (n === 1000) continue
        if (!values.follow || stop.signal.aborted) break
        await sleep(FOLLOW_INTERVAL_MS, undefined, { signal: stop.signal }).catch(() => undefined)
        if (stop.signal.aborted) break
      }
    })
    return 0
  },
}
