import type { SmsMessage, SmsSender } from '../../src/platform/sms.js'

/** An SMS sender that keeps every message, so tests read the codes the service sent. */
export class SmsInbox implements SmsSender {
  readonly messages: SmsMessage[] = []

  async send(message: SmsMessage): Promise<void> {
    this.messages.push(message)
  }

  to(phone: string): SmsMessage[] {
    return this.messages.filter((m) => m.to === phone)
  }

  /** The code of the latest message to `phone`; throws when none was sent. */
  codeFor(phone: string): string {
    const last = this.to(phone).at(-1)
    const code = last && /\b(\d{6})\b/.exec(last.text)?.[1]
    if (!code) throw new Error(`no code was sent to ${phone}`)
    return code
  }
}
