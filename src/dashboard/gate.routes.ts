import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { gateOverview } from '../checkin/checkin.service.js'
import { crumbs, html, layout, num, table } from './kit/html.js'
import { pageKit, sendPage, sessionOf } from './kit/pages.js'
import type { SessionDeps } from './session.service.js'
import { findEvent } from './stats.service.js'
import type { EventSummary } from './templates.js'
import { canSeeEvent, type Viewer } from './viewers.js'

type Overview = Awaited<ReturnType<typeof gateOverview>>

/** Seconds between the page's reloads: the counts are live. */
const REFRESH_SECONDS = 10
const REASONS: Record<string, string> = {
  already_used: 'already in / used',
  product: 'wrong ticket type',
  invalid_time: 'outside the doors',
  revoked: 'revoked code',
  unknown: 'unknown ticket',
  wrong_event: 'other event',
  error: 'error',
}

/** The event-local hour (`YYYY-MM-DDTHH`) after `hour`. */
function nextHour(hour: string): string {
  const d = new Date(`${hour}:00:00Z`)
  return new Date(d.getTime() + 3_600_000).toISOString().slice(0, 13)
}

/**
 * Entries per event-local hour as bars, the hours without entries between the first and the last shown
 * as gaps (the latest 48 hours at most); SVG: no script, no inline style, within the page policy.
 */
function hoursChart(entries: Overview[number]['entries_per_hour']) {
  if (entries.length === 0) return html`<p class="meta">No entries yet.</p>`
  const byHour = new Map(entries.map((h) => [h.hour, h.entries]))
  const hours: { hour: string; entries: number }[] = []
  for (let h = entries[0]!.hour; h <= entries.at(-1)!.hour; h = nextHour(h))
    hours.push({ hour: h, entries: byHour.get(h) ?? 0 })
  const shown = hours.slice(-48)
  const max = Math.max(...shown.map((h) => h.entries))
  const w = 22
  const height = 90
  const every = shown.length > 24 ? 3 : 1
  const bars = shown.map((h, i) => {
    const bar = h.entries === 0 ? 0 : Math.max(2, Math.round((h.entries / max) * height))
    const label =
      i % every === 0
        ? html`<text x="${i * w + (w - 4) / 2}" y="${height + 13}" font-size="10" fill="#667" text-anchor="middle">${h.hour.slice(11)}</text>`
        : ''
    return html`<rect x="${i * w}" y="${height - bar}" width="${w - 4}" height="${bar}" fill="#2f6fdf"><title>${h.hour.replace('T', ' ')}:00 · ${h.entries} entries</title></rect>${label}`
  })
  const width = shown.length * w
  return html`<figure class="hours"><svg role="img" aria-label="Entries per hour" width="${width}" height="${height + 16}" viewBox="0 0 ${width} ${height + 16}"><line x1="0" y1="${height}" x2="${width}" y2="${height}" stroke="#ccd"/>${bars}</svg>
  <figcaption class="meta">Entries per hour (event time) from ${shown[0]!.hour.replace('T', ' ')}:00, peak ${max}</figcaption></figure>`
}

export function gatePage(
  session: { viewer: Viewer; csrfToken: string },
  event: EventSummary,
  lists: Overview,
) {
  const total = lists.reduce((n, l) => n + l.inside, 0)
  const rows = lists.map(
    (l) => html`<tr data-list="${l.checkin_list_id}">
      <td><strong>${l.name}</strong>${l.is_default ? html` <span class="meta">(default)</span>` : ''}</td>
      <td class="num"><strong data-inside>${l.inside}</strong></td>
      <td class="num">${l.entries}</td>
      <td class="num">${l.exits}</td>
      <td class="num">${l.counted_out}</td>
      <td>${
        Object.keys(l.refused).length === 0
          ? html`<span class="meta">none</span>`
          : Object.entries(l.refused).map(
              ([r, n]) => html`<span class="badge" data-reason="${r}">${REASONS[r] ?? r}: ${n}</span> `,
            )
      }</td>
    </tr>`,
  )
  const charts = lists
    .filter((l) => l.entries_per_hour.length > 0)
    .map((l) => html`<section class="panel"><h2>${l.name}</h2>${hoursChart(l.entries_per_hour)}</section>`)
  return layout(
    { title: `Gate · ${event.name}`, session },
    html`<main class="event gate">
    ${crumbs(event)}
    <div class="heading">
      <h1>Gate</h1>
      <p class="meta">Inside now, per check-in list · updated every ${REFRESH_SECONDS} s · ${lists[0]?.at.slice(0, 19).replace('T', ' ') ?? ''} UTC</p>
    </div>
    <section class="tiles" aria-label="Totals">
      <div class="tile"><span class="label">Inside, all lists</span><span class="value" data-figure="inside">${total}</span></div>
      <div class="tile"><span class="label">Entries</span><span class="value">${lists.reduce((n, l) => n + l.entries, 0)}</span></div>
      <div class="tile"><span class="label">Refused</span><span class="value">${lists.reduce((n, l) => n + Object.values(l.refused).reduce((a, b) => a + (b ?? 0), 0), 0)}</span></div>
    </section>
    <section class="panel">
      <h2>Check-in lists</h2>
      ${table({
        class: 'types gate-lists',
        columns: ['List', num('Inside'), num('Entries'), num('Exits'), num('Counted out'), 'Refused'],
        rows,
      })}
    </section>
    ${charts}
  </main>`,
  ).replace(
    '<meta charset="utf-8">',
    `<meta charset="utf-8">\n  <meta http-equiv="refresh" content="${REFRESH_SECONDS}">`,
  )
}

/**
 * The gate page of an event: who is inside each area now, entries, exits, counted out, refusals by
 * reason, and entries per hour (docs/gate.md). Event-wide figures: administrators and network managers
 * of the event, and dashboard users bound to no partner (a partner's user sees its own figures only).
 */
export const gatePageRoutes: FastifyPluginAsyncTypebox<SessionDeps> = async (app, deps) => {
  const kit = pageKit(deps)
  app.get(
    '/dashboard/events/:event_id/gate',
    kit.eventPage({
      summary:
        "An event's gate: inside now per check-in list, entries, exits, refusals by reason, entries per hour",
      doc: {
        operationId: 'getDashboardGatePage',
        returns: "The page of the event's gate: inside now per check-in list, entries per hour",
      },
    }),
    async (request, reply) => {
      const { event_id } = request.params
      const session = sessionOf(
        request,
        (viewer) => canSeeEvent(viewer, event_id) && (viewer.partners === 'all' || viewer.partners === null),
      )
      const event = await findEvent(deps, event_id)
      const lists = await gateOverview(deps, event_id, event.timezone)
      return sendPage(reply, gatePage(session, event, lists))
    },
  )
}
