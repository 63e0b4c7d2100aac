import { type KeyObject, verify } from 'node:crypto'
import type { EdgeKeys } from '../edge/edge-keys.js'
import { TICKET_CODE_TYP, type TicketCodeClaims } from '../edge/ticket-codes.js'

/** The longest code a scan may carry: codes are about 300 characters; the scanner reads at most 2048. */
export const MAX_SCANNED_CODE = 2048

/** What a scanned code says about its ticket, once its signature checked out. */
export interface ScannedCode {
  /** The code's version (`n`). */
  version: number
  /** When this version was issued (epoch ms, whole seconds): a scan of it cannot be earlier. */
  issuedAt: number
}

const B64URL = /^[A-Za-z0-9_-]+$/

function json(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString())
  } catch {
    return undefined
  }
}

function signedBy(publicKey: KeyObject, input: string, signature: string): boolean {
  try {
    return verify(null, Buffer.from(input), publicKey, Buffer.from(signature, 'base64url'))
  } catch {
    return false
  }
}

/**
 * A code an offline scan carried, checked as the scanner checks it: a compact JWS whose header is a
 * ticket code's (`typ` wb-ticket, or none for codes made before the header; an offline token, signed
 * with the same key, is not a code), signed EdDSA by a published edge key (the current one or one in
 * EDGE_PREVIOUS_KEYS), with the claims of a code of `transferUid`. Null when it is not such a code:
 * malformed, another `typ`, an unknown key, a bad signature, or a code of another ticket. Expiry is not
 * checked: an upload may come days after the scan, and the scan's time is judged on its own.
 */
export function verifyScannedCode(keys: EdgeKeys, code: string, transferUid: string): ScannedCode | null {
  const parts = code.split('.')
  if (parts.length !== 3 || !parts.every((p) => B64URL.test(p))) return null
  const [headerPart, payloadPart, signature] = parts as [string, string, string]
  const header = json(headerPart) as { alg?: unknown; kid?: unknown; typ?: unknown } | undefined
  if (typeof header !== 'object' || header === null) return null
  if (header.typ !== undefined && header.typ !== TICKET_CODE_TYP) return null
  if (header.alg !== 'EdDSA' || typeof header.kid !== 'string') return null
  const key = keys.byKid(header.kid)
  if (!key) return null
  if (!signedBy(key.publicKey, `${headerPart}.${payloadPart}`, signature)) return null
  const claims = json(payloadPart) as Partial<TicketCodeClaims> | undefined
  if (typeof claims !== 'object' || claims === null) return null
  const { t, n, nbf } = claims
  if (t !== transferUid || !Number.isSafeInteger(n) || n! < 1 || typeof nbf !== 'number') return null
  return { version: n!, issuedAt: nbf * 1000 }
}
