import { randomBytes } from 'node:crypto'

/** URL-safe random string from `bytes` bytes of CSPRNG output. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url')
}
