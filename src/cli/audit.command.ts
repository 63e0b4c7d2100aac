import { setTimeout as sleep } from 'node:timers/promises'
import { type AuditRow, listAuditEntries } from '../audit/audit.store.js'
import { audited, integerOption, type Subcommand, stringOption, withContext } from './command.js'

// How often --follow looks for new entries: quick enough to watch an incident, light on the database.
const FOLLOW_INTERVAL_MS = 500

function format(row: AuditRow, json: boolean): string {
  const detail = row.detail === null ? null : (JSON.parse(row.detail) as unknown)
  if (json) return JSON.stringify({ ...row, at: new Date(row.at).toISOString(), detail })
  return [
    new Date(row.at).toISOString(),
    row.kind,
    row.outcome,
    `actor=${row.actor ?? '-'}`,
    `ip=${row.ip ?? '-'}`,
    detail === null ? '' : JSON.stringify(detail),
  ]
    .join('  ')
    .trimEnd()
}

export const auditCommand: Subcommand = {
  summary: 'Print the audit log',
  usage: `Usage: wristband audit [--follow] [--kind KIND] [--limit N] [--json]

Prints the newest audit-log entries, oldest first; with --follow keeps printing new ones until
interrupted (Ctrl-C). Reading the log is itself recorded in it.

Options:
  --follow, -f         keep printing entries as they are written
  --kind KIND          only entries of this kind (e.g. login_failed, cli_admin_create)
  --limit N            how many of the newest entries to print first (default 50, at most 10000)
  --json               one JSON object per line`,
  options: {
    follow: { type: 'boolean', short: 'f' },
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
    // Listening for the stop signal from the start: a signal that arrives while the first page is
    // being printed must still end the follow cleanly (exit 0), not kill the process.
    const stop = new AbortController()
    if (values.follow)
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort())
    await withContext(loadConfig(), async (ctx) => {
      await audited(ctx, 'cli_audit_read', async () => ({
        detail: { follow: Boolean(values.follow), kind: kind ?? null, limit },
      }))
      const filter = kind === undefined ? {} : { kind }
      let last = 0
      const print = (rows: AuditRow[]) => {
        for (const r of rows) {
          console.log(format(r, json))
          last = r.id
        }
      }
      print(await listAuditEntries(ctx.db, { ...filter, limit }))
      if (!values.follow) return
      while (!stop.signal.aborted) {
        print(await listAuditEntries(ctx.db, { ...filter, afterId: last, limit: 1000 }))
        await sleep(FOLLOW_INTERVAL_MS, undefined, { signal: stop.signal }).catch(() => undefined)
      }
    })
    return 0
  },
}
