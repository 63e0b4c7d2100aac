// The scanner page wristband serves at /scanner/ (bundled with @wristband/scanner by build.mjs): set up
// from a set-up QR code, scans with a keyboard-wedge reader or typed codes, syncs every few seconds while
// the network is there, and keeps everything in IndexedDB. Its service worker (sw.js) keeps the page's
// files, so a reload without the network opens it with its data.
import { openDB } from 'idb'
import { DeviceSession, openIndexedDbStorage, Scanner, ScannerError, setUpDevice } from '../src/index.ts'

const SYNC_EVERY_MS = 5000
/** The database of the page's own settings (the device's credentials and gate); the scanner has its own. */
const SETTINGS_DB = 'wristband-scanner-settings'

const el = (id) => document.getElementById(id)

/** The service this page belongs to: the address up to its /scanner/ folder. */
const serviceBase = () => {
  const at = location.pathname.lastIndexOf('/scanner/')
  return `${location.origin}${location.pathname.slice(0, Math.max(at, 0))}`
}

async function openSettings() {
  const db = await openDB(SETTINGS_DB, 1, {
    upgrade(d) {
      d.createObjectStore('settings')
    },
  })
  return {
    get: (key) => db.get('settings', key),
    set: (key, value) => db.put('settings', value, key),
  }
}

const state = {
  scanner: undefined,
  gate: undefined,
  /** The check-in list scanned on (undefined: the event's default list) and the direction. */
  listId: undefined,
  direction: 'entry',
  sync: 'starting',
  message: '',
  lastSync: undefined,
}

function renderStatus() {
  const status = el('status')
  const s = state.scanner
  status.dataset.state = state.sync
  if (s) {
    status.dataset.known = String(s.known)
    status.dataset.pending = String(s.pending)
  }
  if (state.lastSync) status.dataset.synced = state.lastSync.toISOString()
  const parts = s ? [`${s.known.toLocaleString('en')} tickets`, `${s.pending} to upload`] : []
  const where = { online: 'online', offline: 'offline', error: state.message, starting: 'starting…' }
  parts.push(where[state.sync] ?? state.sync)
  if (state.lastSync) parts.push(`synced ${state.lastSync.toLocaleTimeString()}`)
  status.textContent = parts.join(' · ')
}

/**
 * The list and direction choices, from the lists the scanner synced (none from a service without lists:
 * then every scan is the single use, and the choices are hidden). A list gone since is dropped for the
 * default list.
 */
function renderPlace() {
  const lists = state.scanner?.checkinLists ?? []
  el('place').hidden = lists.length === 0
  if (!lists.some((l) => l.id === state.listId)) state.listId = undefined
  const select = el('list')
  select.replaceChildren(
    ...lists.map((l) => {
      const option = document.createElement('option')
      option.value = String(l.id)
      option.textContent = l.name
      option.selected = l.id === state.listId || (state.listId === undefined && l.is_default)
      return option
    }),
  )
  el('direction').value = state.direction
}

const REFUSALS = {
  product: 'Refused: this ticket is not for this list',
  invalid_time: 'Refused: this list is closed now',
}

const localTime = (iso) => (iso ? new Date(iso).toLocaleString() : 'an earlier time')

function describe(r) {
  switch (r.status) {
    case 'VALID':
      return r.direction === 'exit' ? 'Exit recorded' : 'Valid: let in'
    case 'REFUSED':
      return REFUSALS[r.reason] ?? `Refused (${r.reason})`
    case 'ALREADY_USED':
      return `Already used ${localTime(r.used_at)} at ${r.gate ?? 'another gate'}${r.source === 'device' ? ' (this scanner)' : ''}`
    case 'REVOKED':
      return 'Revoked: this code was replaced by a newer one'
    case 'EXPIRED':
      return 'Expired'
    case 'WRONG_EVENT':
      return 'A ticket of another event'
    default:
      return `Not a genuine ticket (${r.reason})`
  }
}

async function syncNow() {
  const s = state.scanner
  if (!s) return
  try {
    await s.sync()
    state.sync = 'online'
    state.lastSync = new Date()
  } catch (err) {
    if (!(err instanceof ScannerError)) throw err
    state.sync = err.kind === 'network' ? 'offline' : 'error'
    state.message = err.message
  }
  renderStatus()
  renderPlace()
}

async function start(settings, credentials) {
  el('setup').hidden = true
  el('scanner').hidden = false
  el('device').textContent =
    `${credentials.event.name} · device ${credentials.device_id} (${credentials.dev_mac})`
  state.gate = (await settings.get('gate')) ?? undefined
  el('gate').value = state.gate ?? ''
  state.listId = (await settings.get('list')) ?? undefined
  state.direction = (await settings.get('direction')) ?? 'entry'
  const session = new DeviceSession(credentials)
  state.scanner = await Scanner.open({
    baseUrl: credentials.baseUrl,
    eventId: credentials.event_id,
    token: () => session.token(),
    storage: await openIndexedDbStorage(),
  })
  renderStatus()
  renderPlace()
  // A gate's reader types the code and Enter into whatever has the focus: the code field.
  el('code').focus()
  el('scan').addEventListener('submit', async (event) => {
    event.preventDefault()
    const input = el('code')
    const text = input.value
    input.value = ''
    input.focus()
    if (!text.trim()) return
    const out = el('result')
    try {
      const result = await state.scanner.scan(text, {
        ...(state.gate ? { gate: state.gate } : {}),
        ...(state.listId !== undefined ? { listId: state.listId } : {}),
        ...(state.direction === 'exit' ? { direction: 'exit' } : {}),
      })
      out.dataset.status = result.status
      out.dataset.reason = result.status === 'REFUSED' ? result.reason : ''
      out.textContent = describe(result)
    } catch (err) {
      // A list this scanner no longer knows (removed by the last sync): nothing was scanned.
      if (!(err instanceof TypeError)) throw err
      out.dataset.status = 'ERROR'
      out.dataset.reason = ''
      out.textContent = err.message
      renderPlace()
    }
    renderStatus()
  })
  // The list and direction apply from the next scan, and are kept for the next load.
  el('list').addEventListener('change', async () => {
    const id = Number(el('list').value)
    const list = state.scanner.checkinLists.find((l) => l.id === id)
    state.listId = list && !list.is_default ? id : undefined
    await settings.set('list', state.listId)
  })
  el('direction').addEventListener('change', async () => {
    state.direction = el('direction').value === 'exit' ? 'exit' : 'entry'
    await settings.set('direction', state.direction)
  })
  el('settings').addEventListener('submit', async (event) => {
    event.preventDefault()
    const gate = el('gate').value.trim()
    state.gate = gate || undefined
    await settings.set('gate', state.gate)
    // Kept for the next load from here on (a reload before this point would not know it).
    el('gate').dataset.saved = state.gate ?? ''
  })
  el('sync-now').addEventListener('click', () => void syncNow())
  window.addEventListener('online', () => void syncNow())
  setInterval(() => void syncNow(), SYNC_EVERY_MS)
  await syncNow()
}

/**
 * Exchanges a set-up code for the device's credentials. A device set up anew for another device or
 * event starts with an empty state; set up again as the same device (a new key) it keeps its scans.
 */
async function setUp(settings, code) {
  const credentials = await setUpDevice(code, { baseUrl: serviceBase() })
  const before = await settings.get('device')
  if (before && (before.device_id !== credentials.device_id || before.event_id !== credentials.event_id)) {
    const storage = await openIndexedDbStorage()
    await storage.clear()
    storage.close()
  }
  await settings.set('device', credentials)
  return credentials
}

async function main() {
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('./sw.js').catch((err) => console.warn('no offline page:', err.message))
    navigator.serviceWorker.ready.then(() => {
      document.documentElement.dataset.offlineReady = 'yes'
    })
  }
  const settings = await openSettings()
  // A set-up QR code opens this page with the code in the fragment, which no server ever sees.
  const fromQr = new URLSearchParams(location.hash.slice(1)).get('setup')
  if (fromQr) history.replaceState(null, '', `${location.pathname}${location.search}`)
  let credentials = await settings.get('device')
  const form = el('setup')
  const failed = (err) => {
    const p = el('setup-error')
    p.hidden = false
    p.textContent = err instanceof ScannerError || err instanceof TypeError ? err.message : String(err)
    form.hidden = false
  }
  if (fromQr) {
    try {
      credentials = await setUp(settings, fromQr)
    } catch (err) {
      failed(err)
    }
  }
  if (credentials) return start(settings, credentials)
  state.sync = 'online'
  renderStatus()
  form.hidden = false
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    try {
      await start(settings, await setUp(settings, el('setup-code').value))
    } catch (err) {
      failed(err)
    }
  })
}

main()
