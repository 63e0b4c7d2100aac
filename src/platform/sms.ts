import fs from 'node:fs/promises'
import path from 'node:path'
import type { RetryAgent, request } from 'undici'
import type { Clock } from './clock.js'
import type { Config } from './config.js'
import { TooManyRequestsError } from './errors.js'
import { randomToken } from './random.js'
import { type CounterStore, resetSeconds } from './rate-limit.js'

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
  // undici is loaded by the first text, not at start: every process of a fleet pays for the code it
  // loads before it serves, and texts are sent only at sign-ups and phone sign-ins.
  let undici: Promise<{ dispatcher: RetryAgent; request: typeof request }> | undefined
  const open = () =>
    (undici ??= import('undici').then(({ Agent, RetryAgent, request }) => {
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
      return { dispatcher, request }
    }))
  return {
    async send(message) {
      const { dispatcher, request } = await open()
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
    async close() {
      if (undici) await (await undici).dispatcher.close()
    },
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

/** The fleet's SMS budget is spent: no text goes out until the minute's window ends. */
export class SmsBudgetSpentError extends TooManyRequestsError {
  constructor(limit: number, retryAfterSeconds: number) {
    super(limit, retryAfterSeconds, 'Too many text messages are being sent; try again in a minute')
  }
}

/** An SMS sender under the fleet's budget (see `budgetedSmsSender`). */
export interface BudgetedSmsSender extends SmsSender {
  /** Spends one text of the budget; rejects with SmsBudgetSpentError when the minute's budget is spent. */
  charge(): Promise<void>
  /** Sends a text that `charge` paid for (a flow that must answer before it sends: phone sign-in). */
  sendCharged(message: SmsMessage): Promise<void>
}

/**
 * SMS_GLOBAL_RATE_LIMIT: at most `perMinute` texts a minute from the whole fleet, whoever asks for them
 * and to whichever numbers, besides the per-number and per-address limits (a botnet of many addresses
 * asking for codes to many numbers would otherwise spend the SMS bill). `counters` are exact across the
 * fleet in Redis when it is configured, in process otherwise; a counter store that fails (Redis
 * unreachable) lets the text through, as every limit fails open. `send` charges, then hands the text to
 * the transport; a refused text rejects with SmsBudgetSpentError (429) before the transport is asked,
 * and `onRefused` is told.
 */
export function budgetedSmsSender(
  sender: SmsSender,
  budget: { perMinute: number; counters: CounterStore; onRefused: () => void },
): BudgetedSmsSender {
  const windowMs = 60_000
  const charge = async () => {
    const hit = budget.counters.hit('all', windowMs)
    const [count, resetInMs] = typeof hit === 'number' ? [hit, budget.counters.resetInMs] : await hit
    if (count > budget.perMinute) {
      budget.onRefused()
      throw new SmsBudgetSpentError(budget.perMinute, resetSeconds(resetInMs))
    }
  }
  return {
    charge,
    sendCharged: (message) => sender.send(message),
    async send(message) {
      await charge()
      await sender.send(message)
    },
  }
}
