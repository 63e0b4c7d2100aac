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
