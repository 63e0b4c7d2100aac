import { createHmac, randomBytes } from 'node:crypto'

/** A new signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes (the key). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

/**
 * The Standard Webhooks headers for one attempt: `webhook-signature` is `v1,` + base64 HMAC-SHA256,
 * keyed with the secret's base64-decoded part, of "id.timestamp.body".
 */
export function signatureHeaders(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${mac}`,
  }
}
