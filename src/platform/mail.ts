import fs from 'node:fs/promises'
import path from 'node:path'
import type { Transporter } from 'nodemailer'
import type { Db } from './db/database.js'
import { enqueue, type JobHandler } from './jobs/jobs.js'
import { randomToken } from './random.js'
import { currentTraceparent } from './tracing.js'

export interface MailMessage {
  to: string
  subject: string
  text: string
  html?: string
  /** Inline images the HTML names as `cid:<cid>`; content in base64. */
  attachments?: { filename: string; cid: string; contentType: string; content: string }[]
}

/** Delivers one message now, or throws. */
export interface MailTransport {
  send(message: MailMessage): Promise<void>
}

/**
 * SMTP through nodemailer, over a pool of up to five connections kept open between messages (each
 * used for 100 messages, closed after `timeoutSeconds` idle): an on-sale's thousands of holder e-mails
 * do not each open a connection and greet again. The timeouts are transport options, given where the
 * transport is created (set on the mailer afterwards they are never read: nodemailer's own are 30 s
 * for the greeting and 10 minutes of silence). A failed attempt is retried by the job queue rather
 * than holding a connection: a message whose connection closes under it fails at once instead of
 * waiting in the pool for another (`maxRequeues: 0`), and a job's lease outlives an attempt.
 * `close` ends the pool's connections, after the jobs that send stopped.
 */
export function smtpTransport(
  url: string,
  from: string,
  timeoutSeconds: number,
): MailTransport & { close(): void } {
  const ms = timeoutSeconds * 1000
  // nodemailer is loaded by the first message, not at start: every process of a fleet pays for the
  // code it loads before it serves, and an instance may send no mail for a long while.
  let transporter: Promise<Transporter> | undefined
  const open = () =>
    (transporter ??= import('nodemailer').then(({ default: nodemailer }) =>
      nodemailer.createTransport(
        {
          url,
          pool: true,
          maxRequeues: 0,
          idleTimeout: ms,
          connectionTimeout: ms,
          greetingTimeout: ms,
          socketTimeout: ms,
        },
        { from },
      ),
    ))
  return {
    async send(m) {
      // Sent by a job that continues a traced request: the relay and whatever reads the mail get the trace.
      const traceparent = currentTraceparent()
      await (await open()).sendMail({
        ...(traceparent ? { headers: { traceparent } } : {}),
        from,
        to: m.to,
        subject: m.subject,
        text: m.text,
        ...(m.html ? { html: m.html } : {}),
        ...(m.attachments
          ? { attachments: m.attachments.map((a) => ({ ...a, encoding: 'base64' as const })) }
          : {}),
      })
    },
    close: () => void transporter?.then((t) => t.close()),
  }
}

/** Development default: one JSON file per message in DATA_DIR/outbox/mail/. */
export function outboxTransport(dir: string, from: string): MailTransport {
  return {
    async send(m) {
      await fs.mkdir(dir, { recursive: true })
      const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomToken(6)}.json`
      await fs.writeFile(path.join(dir, name), JSON.stringify({ from, ...m }, null, 2), { mode: 0o600 })
    },
  }
}

export const MAIL_JOB = 'mail'

/** About a day of retries while the mail server is down. */
export const MAIL_RETRY_SCHEDULE = [10, 30, 60, 300, 900, 1800, 3600, 3600, 7200, 7200, 21600, 43200] as const

export function mailJob(transport: MailTransport): JobHandler<MailMessage> {
  return {
    retrySchedule: MAIL_RETRY_SCHEDULE,
    async run(m, { signal }) {
      // A runner that lost its lease leaves the message to the one that took the job over.
      signal.throwIfAborted()
      await transport.send(m)
    },
  }
}

/**
 * Queues a message; it is sent by the job runner and retried while the mail server is unreachable.
 * Pass the transaction of the change the message reports, so both commit together.
 */
export async function queueMail(db: Db, now: number, message: MailMessage): Promise<void> {
  await enqueue(db, now, { kind: MAIL_JOB, payload: message })
}
