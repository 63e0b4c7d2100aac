import { crumbs, flash, html, layout, table } from './kit/html.js'
import type { EventSummary } from './templates.js'
import type { Viewer } from './viewers.js'

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number]

export interface DeliveryAttemptView {
  attempted_at: number
  status_code: number | null
  error: string | null
  response_body: string | null
}

export interface DeliveryView {
  id: number
  uid: string
  status: string
  payload: string
  attempts: number
  created_at: number
  delivered_at: number | null
  next_attempt_at: number | null
  attempts_log: DeliveryAttemptView[]
}

export interface DeliveriesPageData {
  event: EventSummary
  /** The event's ticket partners; the page shows one partner's receiver and deliveries at a time. */
  partners: { id: number; name: string }[]
  /** The partner shown (undefined: the event has no partner yet). */
  partner: { id: number; name: string } | undefined
  receiver: { url: string; disabled_reason: string | null; enabled: boolean } | null
  deliveries: DeliveryView[]
  status: DeliveryStatus | undefined
  /** The id to pass as `before` for the next (older) page, when there is one. */
  older: number | undefined
  notice: { kind: 'good' | 'bad'; text: string } | undefined
  /**
   * Set when the viewer (a dashboard user) answers for no partner of this event: it is bound to none
   * (null) or to a name the event has no partner of. The page then says so and shows no deliveries.
   */
  unbound?: { partner: string | null }
}

const EXCERPT = 80
const when = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`
const excerpt = (text: string | null) =>
  text ? (text.length > EXCERPT ? `${text.slice(0, EXCERPT)}…` : text) : ''

/** What happened, from the notification's payload (a ticket use), in a few words. */
function eventOf(payload: string) {
  try {
    const p = JSON.parse(payload) as Record<string, unknown>
    const transfer = String(p.transfer_uid ?? '')
    return html`<strong>Ticket ${String(p.status ?? '').toLowerCase() || 'event'}</strong><br>
      <span class="meta">${p.company_ticket_id ?? ''}</span><br><code title="${transfer}">${transfer.slice(0, 12)}…</code>`
  } catch {
    return html`<code>${excerpt(payload)}</code>`
  }
}

function attemptsOf(d: DeliveryView) {
  if (!d.attempts_log.length) return html`<span class="meta">Not sent yet</span>`
  return html`<ol class="attempts">${d.attempts_log.map(
    (a) => html`<li data-attempt>
      <time>${when(a.attempted_at)}</time> ·
      <span class="${a.status_code !== null && a.status_code < 300 ? 'good' : 'bad'}">${
        a.status_code !== null ? `HTTP ${a.status_code}` : (a.error ?? 'no answer')
      }</span>
      ${a.response_body ? html`<code class="excerpt">${excerpt(a.response_body)}</code>` : ''}
    </li>`,
  )}</ol>`
}

export function deliveriesPage(
  session: { viewer: Viewer; csrfToken: string },
  data: DeliveriesPageData,
): string {
  const base = `/dashboard/events/${data.event.id}/webhooks`
  if (data.unbound) return unboundPage(session, data, data.unbound.partner)
  const receiver = !data.partner
    ? 'No ticket partner has an API key for this event yet.'
    : data.receiver
      ? html`Receiver <code>${data.receiver.url}</code> · ${
          data.receiver.enabled
            ? 'enabled'
            : html`<span class="bad">disabled${data.receiver.disabled_reason ? `: ${data.receiver.disabled_reason}` : ''}</span>`
        }`
      : 'No receiver is registered (PUT /companies/webhook).'
  const rows = data.deliveries.map(
    (d) => html`<tr data-delivery="${d.id}" data-status="${d.status}">
      <td><strong>#${d.id}</strong><br><code>${d.uid}</code></td>
      <td>${eventOf(d.payload)}</td>
      <td><span class="badge ${d.status}">${d.status}</span><br><span class="meta">${d.attempts} ${
        d.attempts === 1 ? 'attempt' : 'attempts'
      }</span></td>
      <td>${attemptsOf(d)}</td>
      <td>${d.status === 'pending' && d.next_attempt_at !== null ? when(d.next_attempt_at) : '—'}</td>
      <td>${
        data.receiver?.enabled
          ? html`<form method="post" action="${base}/deliveries/${d.id}/resend">
          <input type="hidden" name="csrf_token" value="${session.csrfToken}">
          <button type="submit">Resend</button>
        </form>`
          : ''
      }</td>
    </tr>`,
  )
  const filterLink = (s: DeliveryStatus | undefined, label: string) =>
    html`<a href="${listUrl(base, data.partner, s ? { status: s } : {})}"${data.status === s ? html` aria-current="page"` : ''}>${label}</a>`
  return deliveriesLayout(session, data, base, receiver, rows, filterLink)
}

/**
 * A dashboard user who answers for no partner of the event sees no partner's receiver or deliveries
 * (partners are isolated from each other), only why and who can change it.
 */
function unboundPage(
  session: { viewer: Viewer; csrfToken: string },
  data: DeliveriesPageData,
  partner: string | null,
): string {
  const why =
    partner === null
      ? 'This account is not bound to a partner of this event'
      : html`This account is bound to the partner “${partner}”, which is not a partner of this event`
  return layout(
    { title: `Webhook deliveries · ${data.event.name}`, session },
    html`<main class="deliveries">
    ${crumbs(data.event)}
    <div class="heading"><h1>Webhook deliveries</h1></div>
    <p class="notice" role="status" data-unbound>${why}, so no webhook receiver or deliveries are shown.
      An administrator can set the account's partner.</p>
  </main>`,
  )
}

/** The page's address for a partner, with more query parameters. */
function listUrl(base: string, partner: { id: number } | undefined, more: Record<string, string>): string {
  const q = new URLSearchParams({ ...(partner ? { partner: String(partner.id) } : {}), ...more }).toString()
  return q ? `${base}?${q}` : base
}

function partnerTabs(base: string, data: DeliveriesPageData) {
  if (data.partners.length < 2)
    return data.partner ? html`<p class="meta">Partner ${data.partner.name}</p>` : ''
  return html`<nav class="filter" aria-label="Partner">Partner:
    ${data.partners.map(
      (p) =>
        html`<a href="${listUrl(base, p, {})}"${data.partner?.id === p.id ? html` aria-current="page"` : ''}>${p.name}</a>`,
    )}
  </nav>`
}

function deliveriesLayout(
  session: { viewer: Viewer; csrfToken: string },
  data: DeliveriesPageData,
  base: string,
  receiver: unknown,
  rows: unknown[],
  filterLink: (s: DeliveryStatus | undefined, label: string) => unknown,
): string {
  return layout(
    { title: `Webhook deliveries · ${data.event.name}`, session },
    html`<main class="deliveries">
    ${crumbs(data.event)}
    <div class="heading">
      <h1>Webhook deliveries</h1>
      <p class="meta">${receiver}</p>
    </div>
    ${partnerTabs(base, data)}
    ${flash(data.notice?.text, data.notice?.kind)}
    <nav class="filter" aria-label="Filter by status">Show:
      ${filterLink(undefined, 'All')} ${DELIVERY_STATUSES.map((s) => filterLink(s, s[0]!.toUpperCase() + s.slice(1)))}
    </nav>
    <section class="panel">
      ${table({
        class: 'deliveries',
        columns: ['Delivery', 'Event', 'Status', 'Attempts (time · answer · response)', 'Next retry', ''],
        rows,
        empty: `No deliveries${data.status ? ` with status ${data.status}` : ''}.`,
      })}
      ${
        data.older !== undefined
          ? html`<p><a href="${listUrl(base, data.partner, {
              ...(data.status ? { status: data.status } : {}),
              before: String(data.older),
            })}">Older deliveries</a></p>`
          : ''
      }
    </section>
  </main>`,
  )
}
