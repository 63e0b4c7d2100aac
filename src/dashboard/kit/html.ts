import type { Viewer } from '../viewers.js'

/** Markup that is already escaped; everything else interpolated into `html` is escaped. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

function escapeHtml(value: unknown): string {
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(escapeHtml).join('')
  if (value === null || value === undefined || value === false) return ''
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]!)
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += escapeHtml(values[i]) + strings[i + 1]!
  return new SafeHtml(out)
}

export const ASSETS = '/dashboard/assets'

export interface LayoutOptions {
  title: string
  /** Present when signed in: shows the account and the sign-out form. */
  session?: { viewer: Viewer; csrfToken: string }
  /** Pages with figures load the chart library and the page script. */
  scripts?: boolean
  /** Pages with passkey buttons load @simplewebauthn/browser and the passkey script. */
  passkeyScripts?: boolean
}

export function layout(opts: LayoutOptions, body: SafeHtml): string {
  const account = opts.session
    ? html`<div class="account">
        <span class="who">${opts.session.viewer.label}</span>
        <a class="link" href="/dashboard/passkeys">Passkeys</a>
        <form method="post" action="/dashboard/logout">
          <input type="hidden" name="csrf_token" value="${opts.session.csrfToken}">
          <button type="submit" class="link">Sign out</button>
        </form>
      </div>`
    : ''
  const scripts = opts.scripts
    ? html`<link rel="stylesheet" href="${ASSETS}/uplot/uPlot.min.css">
  <script src="${ASSETS}/uplot/uPlot.iife.min.js" defer></script>
  <script src="${ASSETS}/dashboard.js" defer></script>`
    : ''
  const passkeyScripts = opts.passkeyScripts
    ? html`<script src="${ASSETS}/webauthn/index.umd.min.js" defer></script>
  <script src="${ASSETS}/passkeys.js" defer></script>`
    : ''
  return `<!doctype html>${html`<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="referrer" content="no-referrer">
  <link rel="icon" href="data:,">
  <title>${opts.title} · wristband</title>
  <link rel="stylesheet" href="${ASSETS}/dashboard.css">
  ${scripts}
  ${passkeyScripts}
</head>
<body>
  <header class="top">
    <a class="brand" href="/dashboard">wristband <span>dashboard</span></a>
    ${account}
  </header>
  ${body}
</body>
</html>
`}`
}

/**
 * The message of a page after an action or a refusal: a notice (`good`, `bad` or plain, a status) or an
 * error (an alert); nothing without a text.
 */
export function flash(text: unknown, kind: 'good' | 'bad' | 'plain' | 'error' = 'plain') {
  if (!text) return ''
  if (kind === 'error') return html`<p class="error" role="alert">${text}</p>`
  return html`<p class="notice${kind === 'plain' ? '' : ` ${kind}`}" role="status">${text}</p>`
}

/** A column of `table`: its head, or `num(head)` for a column of figures (right-aligned). */
type Column = string | { label: string; num: true }
export const num = (label: string): Column => ({ label, num: true })

/** The way back: to the event list, and to the event's page when the page is one of its. */
export function crumbs(event?: { id: number; name: string }) {
  return event
    ? html`<nav class="crumbs"><a href="/dashboard">Events</a> › <a href="/dashboard/events/${event.id}">${event.name}</a></nav>`
    : html`<nav class="crumbs"><a href="/dashboard">Events</a></nav>`
}

/** A table in its scrolling box: the columns' heads, the rows, and the one row saying there are none. */
export function table(opts: { class: string; columns: Column[]; rows: unknown[]; empty?: unknown }) {
  const heads = opts.columns.map((c) =>
    typeof c === 'string' ? html`<th>${c}</th>` : html`<th class="num">${c.label}</th>`,
  )
  const none = html`<tr><td colspan="${opts.columns.length}" class="empty">${opts.empty}</td></tr>`
  return html`<div class="scroll">
        <table class="${opts.class}">
          <thead><tr>${heads}</tr></thead>
          <tbody>${opts.rows.length || opts.empty === undefined ? opts.rows : none}</tbody>
        </table>
      </div>`
}

/** The page of an error or a refusal, with the account's header when signed in. */
export function messagePage(
  title: string,
  message: string,
  session?: { viewer: Viewer; csrfToken: string },
): string {
  return layout(
    { title, ...(session ? { session } : {}) },
    html`<main class="narrow"><h1>${title}</h1><p>${message}</p><p><a href="/dashboard">Back to the events</a></p></main>`,
  )
}
