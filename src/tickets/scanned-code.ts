import { type CompactVerifyResult, compactVerify } from 'jose'
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

/**
 * A code an offline scan carried, checked as the scanner checks it: a compact JWS whose header is a
 * ticket code's (`typ` wb-ticket, or none for codes made before the header; an offline token, signed
 * with the same key, is not a code), signed EdDSA by a published edge key (the current one or one in
 * EDGE_PREVIOUS_KEYS), with the claims of a code of `transferUid`. Null when it is not such a code:
 * malformed, another `typ`, an unknown key, a bad signature, or a code of another ticket. Expiry is not
 * checked: an upload may come days after the scan, and the scan's time is judged on its own.
 */
export async function verifyScannedCode(
  keys: EdgeKeys,
  code: string,
  transferUid: string,
): Promise<ScannedCode | null> {
  let verified: CompactVerifyResult
  try {
    verified = await compactVerify(
      code,
      ({ kid }) => {
        const key = kid === undefined ? undefined : keys.byKid(kid)
        if (!key) throw new Error('unknown key')
        return key.publicKey
      },
      { algorithms: ['EdDSA'] },
    )
  } catch {
    return null
  }
  const { typ } = verified.protectedHeader
  if (typ !== undefined && typ !== TICKET_CODE_TYP) return null
  let claims: Partial<TicketCodeClaims> | null
  try {
    claims = JSON.parse(new TextDecoder().decode(verified.payload)) as Partial<TicketCodeClaims> | null
  } catch {
    return null
  }
  if (typeof claims !== 'object' || claims === null) return null
  const { t, n, nbf } = claims
  if (t !== transferUid || !Number.isSafeInteger(n) || n! < 1 || typeof nbf !== 'number') return null
  return { version: n!, issuedAt: nbf * 1000 }
}
