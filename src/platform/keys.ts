import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto'

/**
 * Every use the signing secrets are put to besides signing tokens, in one list: each has its own key,
 * derived with HKDF, so that no purpose can be turned against another.
 */
type SealPurpose = 'mfa-secret' | 'dashboard-sign-in' | 'webhook-secret' | 'operator-session'
type KeyPurpose = 'phone-codes'

/**
 * The keys derived from the signing secrets, the one way a feature gets one: features are given this,
 * never the secrets themselves (which only the token authority holds).
 */
export interface SecretKeys {
  /** Seals under the current secret's key for `purpose`; opens under the previous secrets' too. */
  sealer(purpose: SealPurpose): Sealer
  /** The current secret's key for `purpose` (one-time codes, which live minutes and need no rotation). */
  key(purpose: KeyPurpose): Buffer
}

export function secretKeys(secrets: readonly string[]): SecretKeys {
  const current = secrets[0]
  if (current === undefined) throw new Error('secretKeys needs at least one secret')
  const sealers = new Map<SealPurpose, Sealer>()
  return {
    sealer(purpose) {
      let sealer = sealers.get(purpose)
      if (sealer === undefined) {
        sealer = createSealer(secrets, purpose)
        sealers.set(purpose, sealer)
      }
      return sealer
    },
    key: (purpose) => deriveKey(current, purpose),
  }
}

/** A 256-bit key for one purpose, derived from a signing secret with HKDF. */
function deriveKey(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'wristband', `wristband/${purpose}`, 32))
}

/** HMAC-SHA256 (hex) of `value` under `key`. */
export function hmacHex(key: Buffer, value: string): string {
  return createHmac('sha256', key).update(value).digest('hex')
}

export interface Sealer {
  /** AES-256-GCM under the current key, with `context` (e.g. the owning record's id) bound as associated data. */
  seal(plaintext: string, context: string): string
  /** The plaintext, or null when tampered with, moved to another context, or sealed under a retired secret. */
  open(sealed: string, context: string): string | null
  /** Whether a value was sealed under a previous secret and should be sealed again. */
  isStale(sealed: string): boolean
}

const VERSION = 'v1'

/**
 * Authenticated encryption with keys derived from the current and previous signing secrets, so that
 * values sealed before a secret rotation still open while the old secret is listed as previous.
 */
function createSealer(secrets: readonly string[], purpose: string): Sealer {
  const keys = secrets.map((s) => {
    const key = deriveKey(s, `${purpose}/aes-256-gcm`)
    // The id names the key without revealing it, so a sealed value finds its key after a rotation.
    return { id: createHash('sha256').update(key).digest('base64url').slice(0, 8), key }
  })
  const current = keys[0]
  if (!current) throw new Error('createSealer needs at least one secret')
  const byId = new Map(keys.map((k) => [k.id, k.key]))
  return {
    seal(plaintext, context) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', current.key, iv)
      cipher.setAAD(Buffer.from(context))
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
      return [
        VERSION,
        current.id,
        ...[iv, body, cipher.getAuthTag()].map((b) => b.toString('base64url')),
      ].join('.')
    },
    isStale: (sealed) => sealed.split('.')[1] !== current.id,
    open(sealed, context) {
      const [version, keyId, iv, body, tag] = sealed.split('.')
      const key = keyId === undefined ? undefined : byId.get(keyId)
      if (version !== VERSION || !key || iv === undefined || body === undefined || tag === undefined)
        return null
      try {
        // A fixed tag length: GCM would otherwise accept a truncated tag, which is easier to forge.
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
          authTagLength: 16,
        })
        decipher.setAAD(Buffer.from(context))
        decipher.setAuthTag(Buffer.from(tag, 'base64url'))
        return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
          'utf8',
        )
      } catch {
        return null
      }
    },
  }
}
