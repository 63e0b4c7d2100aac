import dns from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'
import type { Agent, request } from 'undici'

/** Raised when a destination resolves to an address the service must not reach. */
export class ForbiddenDestinationError extends Error {
  readonly code = 'EFORBIDDENDEST'
}

export interface HttpResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** At most `maxBodyBytes` of the answer, as text. */
  body: string
}

export interface HttpClient {
  post(url: string, opts: { headers: Record<string, string>; body: string }): Promise<HttpResponse>
  /** Throws ForbiddenDestinationError when the URL's host is (or resolves to) a refused address. */
  checkDestination(url: string): Promise<void>
  close(): Promise<void>
}

export interface HttpClientOptions {
  /** Allow loopback, private, link-local and other non-public addresses (WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean
  timeoutMs: number
  maxBodyBytes?: number
}

/**
 * An address in the strict forms `net.isIP` knows. ipaddr.js reads `::a.b.c.d` as IPv4-mapped (it is
 * IPv4-compatible), so IPv6 goes through the WHATWG URL parser first, which spells it in hex.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const family = isIP(address)
  if (family === 4) return ipaddr.IPv4.parse(address)
  if (family !== 6) return undefined
  try {
    return ipaddr.process(new URL(`http://[${address}]/`).hostname.slice(1, -1))
  } catch {
    return undefined // a zone index (fe80::1%eth0) is no public address either
  }
}

/** Global unicast IPv6 (RFC 4291 §2.4): every other block is reserved, local or special-purpose. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3')

/**
 * Only globally routable unicast addresses. IPv4-mapped IPv6 is judged as the IPv4 it carries. Every
 * other IPv6 form that embeds an IPv4 address is refused whole, whatever it embeds: IPv4-compatible
 * (`::a.b.c.d`, ::/96, deprecated) lies outside 2000::/3, and 6to4 (2002::/16), Teredo (2001::/32),
 * NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and SIIT (::ffff:0:0/96) are special-purpose ranges.
 */
export function isPublicAddress(address: string): boolean {
  const ip = parseAddress(address)
  if (!ip) return false
  if (ip.kind() === 'ipv6' && !ip.match(GLOBAL_UNICAST_V6)) return false
  return ip.range() === 'unicast'
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1')
}

/**
 * The HTTP client for addresses that callers choose: webhook receivers registered by partners, which
 * must not reach this network's private services. The IdP (`idp/idp.verifier.ts`, through jose) and the
 * SMS provider (`platform/sms.ts`, with retries) use their own clients: their URLs come from the
 * operator's configuration, not from a caller, and they need what this client does not do (key-set
 * caching, retried POSTs). The address check runs inside the connection's DNS look-up, so the
 * address that is checked is the address that is connected to (no window for DNS rebinding); IP
 * literals, which skip the look-up, are checked before connecting. Redirects are never followed:
 * a 3xx is an answer like any other.
 */
export function createHttpClient(opts: HttpClientOptions): HttpClient {
  const maxBody = opts.maxBodyBytes ?? 1024
  const guardedLookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0)
      const list = addresses as dns.LookupAddress[]
      const refused = opts.allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address))
      if (refused || list.length === 0) {
        const e = new ForbiddenDestinationError(
          `${hostname} resolves to ${refused?.address ?? 'nothing'}, which is not a public address`,
        )
        return callback(e as NodeJS.ErrnoException, '', 0)
      }
      if ((options as { all?: boolean }).all)
        return (callback as (e: null, a: dns.LookupAddress[]) => void)(null, list)
      callback(null, list[0]!.address, list[0]!.family)
    })
  }
  // undici is loaded by the first request, not at start: every process of a fleet pays for the code it
  // loads before it serves, and an instance may have no webhook to deliver for a long while.
  let undici: Promise<{ agent: Agent; request: typeof request }> | undefined
  const open = () =>
    (undici ??= import('undici').then(({ Agent, request }) => ({
      agent: new Agent({
        connect: { lookup: guardedLookup, timeout: opts.timeoutMs },
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
        keepAliveTimeout: 4_000,
      }),
      request,
    })))

  function checkLiteral(url: URL) {
    const host = hostOf(url)
    if (!opts.allowPrivate && ipaddr.isValid(host) && !isPublicAddress(host))
      throw new ForbiddenDestinationError(`${host} is not a public address`)
  }

  return {
    async post(target, { headers, body }) {
      const url = new URL(target)
      checkLiteral(url)
      const { agent, request } = await open()
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'wristband-webhooks/0.1', ...headers },
        body,
        dispatcher: agent,
        signal: AbortSignal.timeout(opts.timeoutMs),
      })
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of res.body) {
        const b = chunk as Buffer
        chunks.push(b)
        size += b.length
        if (size >= maxBody) break
      }
      // Leaving the loop early ends the stream; the rest of an oversized answer is discarded.
      res.body.destroy()
      return {
        status: res.statusCode,
        headers: res.headers,
        body: Buffer.concat(chunks).subarray(0, maxBody).toString('utf8'),
      }
    },
    async checkDestination(target) {
      const url = new URL(target)
      checkLiteral(url)
      if (opts.allowPrivate || ipaddr.isValid(hostOf(url))) return
      const addresses = await dns.promises.lookup(hostOf(url), { all: true })
      const refused = addresses.find((a) => !isPublicAddress(a.address))
      if (refused) throw new ForbiddenDestinationError(`${url.hostname} resolves to ${refused.address}`)
    },
    async close() {
      if (undici) await (await undici).agent.close()
    },
  }
}
