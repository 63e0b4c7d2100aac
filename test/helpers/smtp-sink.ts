import type { AddressInfo } from 'node:net'
import { type ParsedMail, simpleParser } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import { startApp, type TestApp } from './app.js'
import type { Backend } from './backends.js'

/**
 * A real SMTP server on a loopback port that keeps every message it receives, parsed. It can be
 * stopped and started again on the same port to play a mail-server outage.
 */
export class SmtpSink {
  readonly messages: ParsedMail[] = []
  private waiters: { match: (m: ParsedMail) => boolean; resolve: (m: ParsedMail) => void }[] = []
  private server: SMTPServer | undefined
  /** While set, every message is received and then left unanswered until it resolves (a slow relay). */
  private held: Promise<void> | undefined
  /** Messages whose data has begun to arrive, answered or not. */
  arriving = 0
  /** Connections opened, and closed, by clients. */
  connections = { opened: 0, closed: 0 }
  port = 0

  /** From now on the sink takes each message's data but answers only once the returned function is called. */
  hold(): () => void {
    let release!: () => void
    this.held = new Promise((resolve) => {
      release = resolve
    })
    return () => {
      this.held = undefined
      release()
    }
  }

  async start(): Promise<void> {
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onConnect: (_session, callback) => {
        this.connections.opened++
        callback()
      },
      onClose: () => {
        this.connections.closed++
      },
      onData: (stream, _session, callback) => {
        this.arriving++
        const held = this.held
        simpleParser(stream)
          .then(async (mail) => {
            await held
            this.messages.push(mail)
            this.waiters = this.waiters.filter((w) => {
              if (!w.match(mail)) return true
              w.resolve(mail)
              return false
            })
            callback()
          })
          .catch(callback)
      },
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    this.port = (server.server.address() as AddressInfo).port
    this.server = server
  }

  async stop(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}`
  }

  /** Messages sent to `to` so far. */
  to(to: string): ParsedMail[] {
    return this.messages.filter((m) => addresses(m).includes(to))
  }

  /** The first message to `to` whose subject matches, received already or still to come. */
  waitFor(to: string, subject: RegExp, timeoutMs = 10_000): Promise<ParsedMail> {
    const match = (m: ParsedMail) => addresses(m).includes(to) && subject.test(m.subject ?? '')
    const seen = this.messages.find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no mail to ${to} matching ${subject} within ${timeoutMs} ms`)),
        timeoutMs,
      )
      this.waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer)
          resolve(m)
        },
      })
    })
  }
}

function addresses(m: ParsedMail): string[] {
  const to = m.to === undefined ? [] : Array.isArray(m.to) ? m.to : [m.to]
  return to.flatMap((a) => a.value.map((v) => v.address ?? ''))
}

/** An app instance that sends its mail over SMTP to a fresh sink, polling jobs every 50 ms. */
export async function startAppWithMail(
  backend: Backend,
  env: Record<string, string> = {},
): Promise<{ t: TestApp; sink: SmtpSink; close(): Promise<void> }> {
  const sink = new SmtpSink()
  await sink.start()
  let t: TestApp
  try {
    t = await startApp(backend, { SMTP_URL: sink.url, JOBS_POLL_MS: '50', ...env })
  } catch (err) {
    // A listening sink would keep the test process alive after the failure.
    await sink.stop()
    throw err
  }
  return {
    t,
    sink,
    async close() {
      await t.close()
      await sink.stop()
    },
  }
}
