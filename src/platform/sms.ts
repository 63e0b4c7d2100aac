import fs from 'node:fs/promises'
import path from 'node:path'
import { Agent, RetryAgent, request } from 'undici'
import type { Clock } from './clock.js'
import type { Config } from './config.js'
import { randomToken } from './random.js'

export interface SmsMessage {
  /** E.164 number. */
  to: string
  text: string
}

/** Delivers one SMS; rejects when the provider did not accept it. */
export interface SmsSender {
  send(message: SmsMessage): Promise<void>
}

/**
 * Development and test delivery: one JSON file per message in `dir`, named so that a directory
 * listing sorts in sending order.
 */
export function outboxSmsSender(dir: string, clock: Clock): SmsSender {
  return {
    async send(message) {
      await fs.mkdir(dir, { recursive: true })
      const now = clock.now()
      const file = path.join(dir, `${String(now).padStart(15, '0')}-${randomToken(6)}.json`)
      const body = { to: message.to, text: message.text, created_at: new Date(now).toISOString() }
      await fs.writeFile(file, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 })
    },
  }
}

export interface WebhookSmsOptions {
  url: string
  authorization?: string | undefined
  timeoutMs: number
  retries: number
  /** Wait before the first retry; doubled for each further one. */
  retryDelayMs?: number
}

/** A generic HTTP provider: POSTs `{to, text}` as JSON; any 2xx answer means accepted. */
export function webhookSmsSender(opts: WebhookSmsOptions): SmsSender & { close(): Promise<void> } {
  const agent = new Agent({
    connectTimeout: opts.timeoutMs,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  })
  // A POST is retried on purpose: a duplicate SMS with the same code is harmless, a lost one is not.
  const dispatcher = new RetryAgent(agent, {
    maxRetries: opts.retries,
    methods: ['POST'],
    minTimeout: opts.retryDelayMs ?? 250,
    maxTimeout: 5000,
    statusCodes: [429, 500, 502, 503, 504],
    errorCodes: [
      'ECONNRESET',
      'ECONNREFUSED',
      'ENOTFOUND',
      'ENETDOWN',
      'ENETUNREACH',
      'EHOSTDOWN',
      'EHOSTUNREACH',
      'EPIPE',
      'UND_ERR_SOCKET',
      'UND_ERR_CONNECT_TIMEOUT',
      'UND_ERR_HEADERS_TIMEOUT',
      'UND_ERR_BODY_TIMEOUT',
    ],
  })
  return {
    async send(message) {
      const res = await request(opts.url, {
        method: 'POST',
        dispatcher,
        headers: {
          'content-type': 'application/json',
          ...(opts.authorization ? { authorization: opts.authorization } : {}),
        },
        body: JSON.stringify({ to: message.to, text: message.text }),
      })
      await res.body.dump()
      if (res.statusCode < 200 || res.statusCode >= 300)
        throw new Error(`SMS provider answered ${res.statusCode}`)
    },
    close: () => dispatcher.close(),
  }
}

/** The configured provider: the webhook when SMS_WEBHOOK_URL is set (and MAIL_TRANSPORT is not `outbox`), else the outbox folder. */
export function createSmsSender(
  config: Pick<
    Config,
    | 'DATA_DIR'
    | 'SMS_WEBHOOK_URL'
    | 'SMS_WEBHOOK_AUTHORIZATION'
    | 'SMS_WEBHOOK_TIMEOUT_SECONDS'
    | 'SMS_WEBHOOK_RETRIES'
    | 'MAIL_TRANSPORT'
  >,
  clock: Clock,
): SmsSender & { close(): Promise<void> } {
  if (config.SMS_WEBHOOK_URL && config.MAIL_TRANSPORT !== 'outbox')
    return webhookSmsSender({
      url: config.SMS_WEBHOOK_URL,
      authorization: config.SMS_WEBHOOK_AUTHORIZATION,
      timeoutMs: config.SMS_WEBHOOK_TIMEOUT_SECONDS * 1000,
      retries: config.SMS_WEBHOOK_RETRIES,
    })
  return { ...outboxSmsSender(path.join(config.DATA_DIR, 'outbox', 'sms'), clock), close: async () => {} }
}
