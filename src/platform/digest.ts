import { createHash, hash, timingSafeEqual } from 'node:crypto'

/**
 * SHA-256 (hex) of a secret token: what the database keeps of API keys, links and session ids, so a
 * read of the table gives no usable token. The one-shot `crypto.hash` (Node 20.12+) costs half of a
 * Hash object, on the path of every API-key verify.
 */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex')
}

/** Constant-time comparison of two strings (lengths are compared through their hashes). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())
}
