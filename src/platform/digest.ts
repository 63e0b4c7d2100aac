import { createHash, timingSafeEqual } from 'node:crypto'

/**
 * SHA-256 (hex) of a secret token: what the database keeps of API keys, links and session ids, so a
 * read of the table gives no usable token.
 */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

/** Constant-time comparison of two strings (lengths are compared through their hashes). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())
}
