import { crumbs, flash, html, layout } from './kit/html.js'
import type { Viewer } from './viewers.js'

export function signInPage(opts: {
  csrfToken: string
  username?: string
  error?: string
  /** Passkeys are on (an RP ID): the passkey button and conditional UI. */
  passkeys?: boolean
}): string {
  return layout(
    { title: 'Sign in', passkeyScripts: opts.passkeys === true },
    html`<main class="narrow">
    <h1>Sign in</h1>
    <p class="hint">Dashboard users sign in with their username; administrators and network managers with their e-mail address.</p>
    ${flash(opts.error, 'error')}
    <form method="post" action="/dashboard/login" class="stack">
      <input type="hidden" name="csrf_token" value="${opts.csrfToken}">
      <label>Username or e-mail
        <input name="username" autocomplete="${opts.passkeys ? 'username webauthn' : 'username'}" required maxlength="254" value="${opts.username ?? ''}" autofocus>
      </label>
      <label>Password
        <input name="password" type="password" autocomplete="current-password" required maxlength="1024">
      </label>
      <button type="submit">Sign in</button>
    </form>
    ${opts.passkeys ? passkeySignInForm(opts.csrfToken, 'Use a passkey', 'Or sign in with a passkey, without password or code.') : ''}
  </main>`,
  )
}

/**
 * The passkey button of a sign-in page: the script asks for options, lets the browser's authenticator
 * answer, and posts the answer with this form. Without a passkey-capable browser it says so.
 */
function passkeySignInForm(csrfToken: string, label: string, hint?: string) {
  return html`<form method="post" action="/dashboard/login/passkey" class="stack passkey" data-passkey-sign-in>
      ${hint ? html`<p class="hint">${hint}</p>` : ''}
      <input type="hidden" name="csrf_token" value="${csrfToken}">
      <input type="hidden" name="response" value="">
      <button type="button" class="secondary" data-passkey-start>${label}</button>
      <p class="error" role="alert" data-passkey-error hidden></p>
    </form>`
}

/** The step after the password for an administrator who must use a passkey (PASSKEYS_REQUIRED_FOR). */
export function passkeyStepPage(opts: { csrfToken: string; error?: string }): string {
  return layout(
    { title: 'Passkey', passkeyScripts: true },
    html`<main class="narrow">
    <h1>Passkey</h1>
    <p class="hint">Confirm the sign-in with your passkey: your device asks for your fingerprint, face or PIN.</p>
    ${flash(opts.error, 'error')}
    ${passkeySignInForm(opts.csrfToken, 'Use my passkey')}
    <p class="hint"><a href="/dashboard/login">Start again</a></p>
  </main>`,
  )
}

export interface PasskeyListItem {
  id: number
  name: string
  created_at: number
  last_used_at: number | null
  backed_up: boolean
}

/** The signed-in account's passkeys: add one (the browser's authenticator), remove one. */
export function passkeysPage(
  session: { viewer: Viewer; csrfToken: string },
  passkeys: PasskeyListItem[],
  opts: { notice?: string; error?: string; available: boolean },
): string {
  const when = (ms: number | null) =>
    ms === null ? 'never' : new Date(ms).toISOString().slice(0, 16).replace('T', ' ')
  const list =
    passkeys.length === 0
      ? html`<p class="empty">No passkeys yet.</p>`
      : html`<table class="passkeys">
        <thead><tr><th>Name</th><th>Added (UTC)</th><th>Last used (UTC)</th><th>Synced</th><th></th></tr></thead>
        <tbody>${passkeys.map(
          (
            p,
          ) => html`<tr data-passkey="${p.id}"><td>${p.name}</td><td>${when(p.created_at)}</td><td>${when(p.last_used_at)}</td><td>${p.backed_up ? 'yes' : 'no'}</td>
            <td><form method="post" action="/dashboard/passkeys/${p.id}/delete">
              <input type="hidden" name="csrf_token" value="${session.csrfToken}">
              <button type="submit" class="link" aria-label="Remove ${p.name}">Remove</button>
            </form></td></tr>`,
        )}</tbody>
      </table>`
  const add = opts.available
    ? html`<form method="post" action="/dashboard/passkeys" class="stack passkey" data-passkey-register>
      <input type="hidden" name="csrf_token" value="${session.csrfToken}">
      <input type="hidden" name="response" value="">
      <label>Name <input name="name" maxlength="100" placeholder="Work laptop"></label>
      ${
        passkeys.length === 0
          ? html`<label>Your password (a first passkey needs it) <input type="password" name="password" maxlength="1024" autocomplete="current-password" required></label>`
          : ''
      }
      <button type="button" data-passkey-start>Add a passkey</button>
      <p class="error" role="alert" data-passkey-error hidden></p>
    </form>`
    : html`<p class="hint">Passkeys are off on this service (no WEBAUTHN_RP_ID).</p>`
  return layout(
    { title: 'Passkeys', session, passkeyScripts: true },
    html`<main class="narrow">
    ${crumbs()}
    <h1>Passkeys</h1>
    <p class="hint">A passkey signs you in with your device's fingerprint, face or PIN instead of a password and code, and cannot be used on a look-alike site.</p>
    ${flash(opts.notice)}
    ${flash(opts.error, 'error')}
    ${list}
    ${add}
  </main>`,
  )
}

/** The step after the password for an administrator whose MFA is on. */
export function totpStepPage(opts: { csrfToken: string; error?: string; passkeys?: boolean }): string {
  return layout(
    { title: 'Authentication code' },
    html`<main class="narrow">
    <h1>Authentication code</h1>
    <p class="hint">Your account uses two-factor authentication. Enter the 6-digit code your authenticator app shows now.</p>
    ${flash(opts.error, 'error')}
    <form method="post" action="/dashboard/login/code" class="stack">
      <input type="hidden" name="csrf_token" value="${opts.csrfToken}">
      <label>Code
        <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" minlength="6" maxlength="6" required autofocus>
      </label>
      <button type="submit">Verify</button>
    </form>
    <p class="hint">${opts.passkeys ? html`<a href="/dashboard/login/passkey">Use a passkey instead</a> · ` : ''}<a href="/dashboard/login">Start again</a></p>
  </main>`,
  )
}

export interface EventSummary {
  id: number
  uid: string
  name: string
  timezone: string
}

/** The headline figures of an event in the list; revenue already in major units (19.99). */
export interface EventListFigures {
  issued: number
  used: number
  revenue: number
}

export function eventListPage(
  session: { viewer: Viewer; csrfToken: string },
  events: (EventSummary & { figures: EventListFigures })[],
): string {
  const count = new Intl.NumberFormat('en-US')
  const money = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
  const list =
    events.length === 0
      ? html`<p class="empty">No events are assigned to this account.</p>`
      : html`<ul class="events">${events.map(
          (e) => html`<li><a href="/dashboard/events/${e.id}"><strong>${e.name}</strong>
            <span class="meta">${e.uid} · ${e.timezone}</span>
            <span class="figures" data-event-figures>${count.format(e.figures.issued)} issued · ${count.format(e.figures.used)} used · ${money.format(e.figures.revenue)} revenue</span></a></li>`,
        )}</ul>`
  return layout({ title: 'Events', session }, html`<main><h1>Events</h1>${list}</main>`)
}

export const RANGES = ['1h', '24h', '7d', '30d'] as const
export type Range = (typeof RANGES)[number]

const RANGE_LABELS: Record<Range, string> = {
  '1h': 'Last hour',
  '24h': 'Last 24 hours',
  '7d': 'Last 7 days',
  '30d': 'Last 30 days',
}

/**
 * The event page is a frame: the page script fills every figure from the JSON endpoint and keeps
 * refreshing it, so the page and API users read one source.
 */
/** A use of a re-issued (revoked) or unknown code, as the event page lists it. */
export interface FlaggedCodeUse {
  uid: string
  company_ticket_id: string
  used_timestamp: string | null
  used_gate: string | null
  code_version: number
  used_revoked_code: number | null
  used_unknown_code: number | null
}

export function eventPage(
  session: { viewer: Viewer; csrfToken: string },
  event: EventSummary,
  flaggedCodeUses: FlaggedCodeUse[] = [],
): string {
  const tile = (key: string, label: string) =>
    html`<div class="tile"><span class="label">${label}</span><span class="value" data-figure="${key}">–</span></div>`
  return layout(
    { title: event.name, session, scripts: true },
    html`<main class="event" data-stats-url="/dashboard/api/events/${event.id}/stats">
    ${crumbs()}
    <div class="heading">
      <h1>${event.name}</h1>
      <p class="meta">${event.uid} · ${event.timezone} · <span class="status" data-status aria-live="polite">Loading…</span></p>
    </div>
    <section class="tiles" aria-label="Totals">
      ${tile('issued', 'Tickets issued')}
      ${tile('claimed', 'Claimed')}
      ${tile('used', 'Used')}
      ${tile('revenue', 'Revenue')}
      ${tile('balance', 'Balance loaded')}
      ${tile('promo_balance', 'Promotional balance loaded')}
    </section>
    <section class="panel">
      <h2>Ticket types</h2>
      <div class="scroll">
        <table class="types">
          <thead><tr><th>Ticket type</th><th>Date</th><th class="num">Price</th><th class="num">Issued</th><th class="num">Claimed</th><th class="num">Used</th><th class="num">Revenue</th></tr></thead>
          <tbody data-ticket-types><tr><td colspan="7" class="empty">Loading…</td></tr></tbody>
        </table>
      </div>
    </section>
    <div class="charts">
      <section class="panel">
        <div class="panel-head">
          <h2>Uses over time</h2>
          <label class="range">Range
            <select data-range>${RANGES.map(
              (r) =>
                html`<option value="${r}"${r === '24h' ? html` selected` : ''}>${RANGE_LABELS[r]}</option>`,
            )}</select>
          </label>
        </div>
        <div class="chart" data-chart="uses"></div>
        <p class="chart-note" data-uses-total></p>
      </section>
      <section class="panel">
        <h2>Uses per access gate</h2>
        <div class="chart" data-chart="gates"></div>
        <p class="chart-note" data-gates-note></p>
      </section>
    </div>
    <section class="panel" data-flagged-code-uses>
      <h2>Uses of re-issued or unknown codes</h2>
      <p class="meta">Entries made with a code that had been re-issued (a leaked screenshot, a lost phone), reached the service before the holder's new code: they count, and the holder's later scan met "already used". Entries a device uploaded with a code the service never issued for the ticket (a version above the current one, or a code that does not verify) count too: look at the device. Latest first.</p>
      ${
        flaggedCodeUses.length === 0
          ? html`<p class="empty">None.</p>`
          : html`<div class="scroll"><table>
          <thead><tr><th>Used (event time)</th><th>Code</th><th>Gate</th><th>Partner's ticket id</th><th>Transfer</th><th class="num">Current code version</th></tr></thead>
          <tbody>${flaggedCodeUses.map(
            (u) =>
              html`<tr><td>${u.used_timestamp ?? ''}</td><td>${u.used_unknown_code === 1 ? 'unknown' : 're-issued'}</td><td>${u.used_gate ?? '–'}</td><td>${u.company_ticket_id}</td><td>${u.uid}</td><td class="num">${u.code_version}</td></tr>`,
          )}</tbody>
        </table></div>`
      }
    </section>
    <section class="panel">
      <h2>Webhook deliveries</h2>
      <p class="meta" data-webhook-url></p>
      <div class="tiles small">
        ${tile('webhook_delivered', 'Delivered')}
        ${tile('webhook_pending', 'Pending')}
        ${tile('webhook_failing', 'Failing, retrying')}
        ${tile('webhook_failed', 'Gave up')}
      </div>
      <p class="last-error" data-webhook-error></p>
      <p><a href="/dashboard/events/${event.id}/webhooks">Every delivery, its attempts, and Resend</a></p>
      <p><a href="/dashboard/events/${event.id}/gate">The gate: who is inside, per check-in list</a></p>
    </section>
    ${
      session.viewer.kind === 'admin'
        ? html`<section class="panel">
      <h2>Devices</h2>
      <p><a href="/dashboard/events/${event.id}/devices">The event's devices: end a lost scanner's tokens</a></p>
    </section>`
        : ''
    }
  </main>`,
  )
}
