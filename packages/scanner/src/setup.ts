import { ScannerError } from './scanner.js'

/** What a scanner keeps after its set-up: with it, it signs in (POST /auth/login/device) and syncs. */
export interface DeviceCredentials {
  /** The service, e.g. https://auth.example.com */
  baseUrl: string
  device_id: number
  dev_mac: string
  event_id: number
  /** The device key (wbd_…): the device's secret, kept on the device only. */
  device_key: string
  event: { uid: string; name: string; timezone: string }
}

/**
 * What a set-up QR code holds: the service's scanner page with the code in its fragment
 * (`https://auth.example.com/scanner/#setup=wbsu_…`), or the code alone (`wbsu_…`, typed in or pasted:
 * then `baseUrl` names the service). Throws TypeError for anything else.
 */
export function parseSetupCode(text: string, baseUrl?: string): { baseUrl: string; code: string } {
  const value = text.trim()
  if (/^wbsu_[A-Za-z0-9_-]+$/.test(value)) {
    if (baseUrl === undefined) throw new TypeError('a set-up code alone needs the service address')
    return { baseUrl: baseUrl.replace(/\/+$/, ''), code: value }
  }
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new TypeError('not a set-up code')
  }
  const code = new URLSearchParams(url.hash.slice(1)).get('setup')
  const page = url.pathname.lastIndexOf('/scanner/')
  if (code === null || !code.startsWith('wbsu_') || page < 0) throw new TypeError('not a set-up code')
  return { baseUrl: `${url.origin}${url.pathname.slice(0, page)}`, code }
}

async function post(fetchFn: typeof fetch, url: string, body: unknown): Promise<Response> {
  try {
    return await fetchFn(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  } catch (err) {
    throw new ScannerError(`network unreachable: ${url} (${(err as Error).message})`, undefined, 'network')
  }
}

/**
 * Sets a scanner up from its set-up code (the QR code's text, or the code with `baseUrl`): exchanges it,
 * once, at POST /devices/setup for the device's credentials. A code that is unknown, used or expired is
 * a ScannerError with status 404: ask the administrator for a new one.
 */
export async function setUpDevice(
  text: string,
  options: { baseUrl?: string; fetch?: typeof fetch } = {},
): Promise<DeviceCredentials> {
  const { baseUrl, code } = parseSetupCode(text, options.baseUrl)
  const res = await post(options.fetch ?? globalThis.fetch.bind(globalThis), `${baseUrl}/devices/setup`, {
    code,
  })
  if (res.status === 404)
    throw new ScannerError('set-up code unknown, used or expired: ask for a new one', 404)
  if (!res.ok) throw new ScannerError(`POST /devices/setup answered ${res.status}`, res.status)
  return { baseUrl, ...((await res.json()) as Omit<DeviceCredentials, 'baseUrl'>) }
}

/**
 * A set-up device's token for its scanner (`token: () => session.token()`): signs in at
 * POST /auth/login/device with the device key when it has no token or half of its token's life has
 * passed, and otherwise hands out the one it has (also when signing in again fails for want of the
 * network: the scan that needs it fails the same way). A 401 or 404 means the device's key was replaced
 * (set up again, rotated) or the device archived: the ScannerError says so.
 */
export class DeviceSession {
  private current: { token: string; renewAt: number; expiresAt: number } | undefined
  private readonly fetchFn: typeof fetch
  private readonly now: () => number

  constructor(
    private readonly credentials: DeviceCredentials,
    options: { fetch?: typeof fetch; now?: () => number } = {},
  ) {
    this.fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis)
    this.now = options.now ?? Date.now
  }

  async token(): Promise<string> {
    const now = this.now()
    const held = this.current
    if (held && now < held.renewAt) return held.token
    const c = this.credentials
    let res: Response
    try {
      res = await post(this.fetchFn, `${c.baseUrl}/auth/login/device`, {
        dev_mac: c.dev_mac,
        event_id: c.event_id,
        device_key: c.device_key,
      })
    } catch (err) {
      if (held && now < held.expiresAt) return held.token
      throw err
    }
    if (res.status === 401 || res.status === 404)
      throw new ScannerError(
        'this device was set up again, its key replaced or the device archived: set it up anew',
        res.status,
      )
    if (!res.ok) throw new ScannerError(`POST /auth/login/device answered ${res.status}`, res.status)
    const body = (await res.json()) as { offline_token: string; expires_at: string }
    const expiresAt = Date.parse(body.expires_at)
    this.current = { token: body.offline_token, expiresAt, renewAt: now + (expiresAt - now) / 2 }
    return body.offline_token
  }
}
