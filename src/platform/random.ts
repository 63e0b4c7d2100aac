import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto'

/** URL-safe random string from `bytes` bytes of CSPRNG output. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url')
}

/** One-shot `crypto.hash` (Node 20.12+): half the cost of a Hash object, on the path of every API-key verify. */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex')
}

/** Constant-time comparison of two strings (lengths are compared through their hashes). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())
}
