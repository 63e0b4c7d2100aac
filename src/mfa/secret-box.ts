import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'

const VERSION = 'v1'
const INFO = 'wristband/mfa-secret/aes-256-gcm/v1'

interface Key {
  id: string
  key: Buffer
}

function deriveKey(signingSecret: string): Key {
  const key = Buffer.from(hkdfSync('sha256', signingSecret, 'wristband', INFO, 32))
  // The id names the key without revealing it, so a sealed value opens with the right key after rotation.
  const id = createHash('sha256').update(key).digest('base64url').slice(0, 8)
  return { id, key }
}

/**
 * Seals short secrets (TOTP seeds) for storage with AES-256-GCM under a key derived by HKDF from the
 * signing secret. `context` (e.g. the administrator id) is bound as associated data, so a sealed value
 * copied to another row does not open. Values sealed under a previous signing secret still open
 * while that secret is listed in JWT_PREVIOUS_SECRETS.
 */
export class SecretBox {
  private readonly current: Key
  private readonly keys: Map<string, Buffer>

  constructor(signingSecret: string, previousSecrets: readonly string[] = []) {
    this.current = deriveKey(signingSecret)
    this.keys = new Map([this.current, ...previousSecrets.map(deriveKey)].map((k) => [k.id, k.key]))
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv)
    cipher.setAAD(Buffer.from(context))
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    const parts = [iv, body, cipher.getAuthTag()].map((b) => b.toString('base64url'))
    return [VERSION, this.current.id, ...parts].join('.')
  }

  /** Whether a sealed value was sealed under a previous secret and should be sealed again. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.current.id
  }

  /** The plaintext, or null when the value was tampered with or its key is no longer configured. */
  open(sealed: string, context: string): string | null {
    const [version, keyId, iv, body, tag] = sealed.split('.')
    const key = keyId === undefined ? undefined : this.keys.get(keyId)
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
  }
}
