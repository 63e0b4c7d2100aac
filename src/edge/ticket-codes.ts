import { createHash, sign } from 'node:crypto'
import { CompactSign } from 'jose'
import type { EdgeKeys } from './edge-keys.js'

/**
 * The payload of a ticket code (the content of its QR code), with one-letter names to keep the code
 * small: event id, transfer uid, ticket type uid, code version, validity window (seconds).
 */
export interface TicketCodeClaims {
  e: number
  t: string
  k: string
  n: number
  nbf: number
  exp: number
}

export interface IssuedCode {
  code: string
  /** The signing input, `header.payload`: what the transfer keeps. */
  body: string
  digest: string
}

/** A code stays valid two days past the later of its ticket date and its issue. */
const GRACE_SECONDS = 2 * 86_400

/**
 * The digest scanners hold instead of the codes: the first 128 bits of SHA-256 of the code, base64url.
 * A stolen scanner's state then admits nobody, while a scanner matches a presented code by one hash.
 */
export function codeDigest(code: string): string {
  return createHash('sha256').update(code).digest('base64url').slice(0, 22)
}

/**
 * Ticket codes are compact JWS (RFC 7515) signed with the edge key (EdDSA, Ed25519): any JOSE library
 * checks them, the key id travels in the header, and the code is about 300 characters, a QR code of
 * version 10 to 13. A transfer keeps only the signing input of its code; the signature is made again
 * on each read (Ed25519 signatures are deterministic, so it is the same code every time, also after a
 * rotation while the old private key is in EDGE_PREVIOUS_KEYS), and a copy of the database admits nobody.
 */
export class TicketCodes {
  constructor(private readonly deps: { keys: EdgeKeys }) {}

  get enabled(): boolean {
    return this.deps.keys.signing !== undefined
  }

  /** Signs the code of one version of a transfer; null without a signing key. */
  async issue(input: {
    eventId: number
    transferUid: string
    ticketUid: string
    version: number
    issuedAt: number
    ticketDate: string
  }): Promise<IssuedCode | null> {
    const key = this.deps.keys.signing
    if (!key) return null
    const nbf = Math.floor(input.issuedAt / 1000)
    // The ticket date is the event's local time; read as UTC it is at most 14 hours off, which the
    // two days of grace absorb.
    const date = Math.floor(Date.parse(`${input.ticketDate}Z`) / 1000)
    const claims: TicketCodeClaims = {
      e: input.eventId,
      t: input.transferUid,
      k: input.ticketUid,
      n: input.version,
      nbf,
      exp: Math.max(Number.isFinite(date) ? date : nbf, nbf) + GRACE_SECONDS,
    }
    const code = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid })
      .sign(key.privateKey)
    return { code, body: code.slice(0, code.lastIndexOf('.')), digest: codeDigest(code) }
  }

  /**
   * The code of a stored signing input: the same bytes `issue` gave. Null when the transfer has no code
   * (made before ticket codes, or without an edge key) or the private key of its kid is gone.
   */
  render(body: string | null): string | null {
    if (body === null) return null
    let kid: unknown
    try {
      kid = JSON.parse(Buffer.from(body.slice(0, body.indexOf('.')), 'base64url').toString()).kid
    } catch {
      return null
    }
    const key = typeof kid === 'string' ? this.deps.keys.byKid(kid)?.privateKey : undefined
    return key ? `${body}.${sign(null, Buffer.from(body), key).toString('base64url')}` : null
  }
}
