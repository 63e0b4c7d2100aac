import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'

/**
 * Longest X-Forwarded-For header taken into account: room for a chain of 20 IPv6 hops. Anything longer
 * did not come from a sane proxy chain and is ignored whole, so it never becomes a rate-limit key.
 */
export const MAX_FORWARDED_FOR_LENGTH = 1024

/**
 * Removes an X-Forwarded-For header the client address must not be taken from: longer than
 * MAX_FORWARDED_FOR_LENGTH, or with any entry that is not an IP address in the strict forms of
 * `net.isIP` (no port, no name, no `0x7f.1`). Fastify then answers `request.ip` with the socket
 * address. Trusted proxies write plain addresses, so only a forged or broken header is lost.
 */
export function dropUnusableForwardedFor(req: IncomingMessage): void {
  const value: string | string[] | undefined = req.headers['x-forwarded-for']
  if (value === undefined) return
  const joined = Array.isArray(value) ? value.join(',') : value
  const usable =
    joined.length <= MAX_FORWARDED_FOR_LENGTH && joined.split(',').every((entry) => isIP(entry.trim()) !== 0)
  if (!usable) delete req.headers['x-forwarded-for']
}

/** The bits of an IPv6 address that name one subscriber: a home line or a host's network gets a /64. */
export const IPV6_PREFIX_BITS = 64

/**
 * The key a per-address limit counts a client under: an IPv4 address as it is (an IPv4-mapped IPv6
 * address as its IPv4 address); an IPv6 address by its /64 (`2001:db8:1:2::/64`), because a caller with
 * a /64, every home line, may use any of its 2^64 addresses and would otherwise get a fresh budget with
 * each. Every per-address budget (the rate-limit hook of every limited route, verify's and the check's
 * anonymous callers) counts under this key; audit records keep the full address.
 */
export function addressKey(ip: string): string {
  if (!ip.includes(':')) return ip
  const hextets = expandIpv6(ip)
  if (hextets === undefined) return ip
  if (hextets[0] === 0 && hextets[1] === 0 && hextets[2] === 0 && hextets[3] === 0 && hextets[4] === 0) {
    if (hextets[5] === 0xffff) {
      const [a, b] = [hextets[6]!, hextets[7]!]
      return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`
    }
  }
  return `${hextets
    .slice(0, 4)
    .map((h) => h.toString(16))
    .join(':')}::/${IPV6_PREFIX_BITS}`
}

/** The eight 16-bit groups of an IPv6 address (zone and embedded IPv4 forms taken), or undefined. */
function expandIpv6(ip: string): number[] | undefined {
  const zone = ip.indexOf('%')
  let text = zone === -1 ? ip : ip.slice(0, zone)
  const groups: number[] = []
  // An embedded IPv4 tail (::ffff:192.0.2.1) is two groups.
  const lastColon = text.lastIndexOf(':')
  let tail: number[] = []
  if (text.indexOf('.', lastColon) !== -1) {
    const v4 = text.slice(lastColon + 1).split('.')
    if (v4.length !== 4) return undefined
    const [a, b, c, d] = v4.map(Number) as [number, number, number, number]
    tail = [(a << 8) | b, (c << 8) | d]
    text = text[lastColon - 1] === ':' ? text.slice(0, lastColon + 1) : text.slice(0, lastColon)
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => Number.parseInt(h, 16)))
  const gap = text.indexOf('::')
  if (gap === -1) groups.push(...parse(text), ...tail)
  else {
    const head = parse(text.slice(0, gap))
    const rest = [...parse(text.slice(gap + 2)), ...tail]
    const zeros = 8 - head.length - rest.length
    if (zeros < 0) return undefined
    groups.push(...head, ...new Array<number>(zeros).fill(0), ...rest)
  }
  if (groups.length !== 8 || groups.some((g) => !(g >= 0 && g <= 0xffff))) return undefined
  return groups
}
