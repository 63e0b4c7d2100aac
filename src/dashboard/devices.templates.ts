import { crumbs, flash, html, layout, table } from './kit/html.js'
import type { EventSummary } from './templates.js'
import type { Viewer } from './viewers.js'

export interface DeviceRow {
  id: number
  dev_mac: string
  operator_id: number | null
  archived: boolean
  has_key: boolean
  created_at: number
}

const when = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`

/** An event's devices with their key state and a form to end a device's offline tokens. */
export function devicesPage(
  session: { viewer: Viewer; csrfToken: string },
  data: { event: EventSummary; devices: DeviceRow[]; notice?: string },
): string {
  const base = `/dashboard/events/${data.event.id}/devices`
  const rows = data.devices.map(
    (d) => html`<tr data-device="${d.id}">
      <td><strong>#${d.id}</strong><br><code>${d.dev_mac}</code></td>
      <td>${d.has_key ? 'yes' : html`<span class="bad">no: signs in with its MAC alone, never syncs</span>`}</td>
      <td>${d.archived ? html`<span class="badge failed">archived</span>` : html`<span class="badge delivered">active</span>`}</td>
      <td>${when(d.created_at)}</td>
      <td><form method="post" action="${base}/${d.id}/revoke">
          <input type="hidden" name="csrf_token" value="${session.csrfToken}">
          <button type="submit">End its tokens</button>
          ${d.archived ? '' : html`<button type="submit" name="archive" value="1">End tokens and archive</button>`}
        </form></td>
    </tr>`,
  )
  return layout(
    { title: `Devices · ${data.event.name}`, session },
    html`<main class="deliveries">
    ${crumbs(data.event)}
    <div class="heading">
      <h1>Devices</h1>
      <p class="meta">Ending a device's tokens refuses every offline token it was issued, on every instance within a second; the device signs in again (with its key) for a new one. An archived device cannot sign in at all (a lost or stolen scanner).</p>
    </div>
    ${flash(data.notice, 'good')}
    <section class="panel">
      ${table({
        class: 'devices',
        columns: ['Device', 'Device key', 'State', 'Registered', ''],
        rows,
        empty: 'No devices are registered at this event.',
      })}
    </section>
  </main>`,
  )
}
