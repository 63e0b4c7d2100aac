import type { QrRenderer } from '../edge/qr.js'
import type { TicketCodes } from '../edge/ticket-codes.js'
import { eventName } from '../events/events.store.js'
import { deleteLinkToken, holdLink, insertLinkToken } from '../holder/holder.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import { fromMinorUnits } from '../platform/formats.js'
import { enqueue, type JobHandler, type NewJob, releaseDedupeKey } from '../platform/jobs/jobs.js'
import { MAIL_RETRY_SCHEDULE, type MailMessage, type MailTransport } from '../platform/mail.js'
import { randomToken } from '../platform/random.js'
import { releaseUnmailed, takeUnmailed, transfersToMail } from '../transfers/transfers.store.js'

export const TRANSFER_MAIL_JOB = 'transfer-mail'

export interface TransferMailPayload {
  linkId: number
}

/** The grouped e-mail of a link, due at `runAt` (a pending one with the same dedupe key takes the transfer along). */
export const transferMailJobOf = (linkId: number, runAt: number): NewJob => ({
  kind: TRANSFER_MAIL_JOB,
  payload: { linkId } satisfies TransferMailPayload,
  runAt,
  dedupeKey: `transfer-mail:${linkId}`,
})

export interface TransferMailDeps {
  db: Db
  clock: Clock
  mail: MailTransport
  /** PUBLIC_BASE_URL */
  publicBaseUrl: string
  /** Gives each ticket's code for its QR image. */
  codes: TicketCodes
  /** Renders the QR images on worker threads, never on the event loop that answers requests. */
  qr: Pick<QrRenderer, 'pngs'>
}

/** The claim link of a token: the holder app opens it, shows GET /holder/links/{token}, then claims. */
export function claimLink(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/holder/links/${token}`
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

interface MailedTicket {
  name: string
  ticket_date: string
  company_ticket_id: string
  balance: number
  promo_balance: number
  seat_number: string | null
  access_gate: string | null
  /** The signed ticket code and its QR image (PNG), when the ticket has one. */
  code?: { text: string; png: Buffer } | null
}

export function transferMessage(
  to: string,
  eventName: string,
  link: string,
  tickets: MailedTicket[],
): MailMessage {
  const describe = (t: MailedTicket) =>
    [
      `${t.name} (${t.ticket_date.replace('T', ' ').slice(0, 16)})`,
      t.seat_number ? `seat ${t.seat_number}` : '',
      t.access_gate ? `gate ${t.access_gate}` : '',
      t.balance > 0 ? `balance ${fromMinorUnits(t.balance).toFixed(2)}` : '',
      t.promo_balance > 0 ? `promo balance ${fromMinorUnits(t.promo_balance).toFixed(2)}` : '',
    ]
      .filter(Boolean)
      .join(', ')
  const n = tickets.length
  const subject = `Your ${n === 1 ? 'ticket' : `${n} tickets`} for ${eventName}`
  const text = [
    `Hello,`,
    '',
    `${n === 1 ? 'A ticket has' : `${n} tickets have`} been sent to you for ${eventName}:`,
    '',
    ...tickets.map(
      (t) =>
        `  - ${describe(t)}${t.code ? `\n    ticket code (the QR code at the gate): ${t.code.text}` : ''}`,
    ),
    '',
    'Open this link in the wristband app to add them to your account:',
    link,
    '',
    'If you did not expect this e-mail, you can ignore it.',
  ].join('\n')
  const html = `<!doctype html><html><body>
<p>Hello,</p>
<p>${n === 1 ? 'A ticket has' : `${n} tickets have`} been sent to you for <strong>${escapeHtml(eventName)}</strong>:</p>
<ul>${tickets
    .map(
      (t, i) =>
        `<li>${escapeHtml(describe(t))}${t.code ? `<br><img src="cid:ticket-${i + 1}@wristband" alt="QR code of the ticket" width="240" height="240">` : ''}</li>`,
    )
    .join('')}</ul>
<p><a href="${escapeHtml(link)}">Add the tickets to your account</a></p>
<p>If you did not expect this e-mail, you can ignore it.</p>
</body></html>`
  const attachments = tickets.flatMap((t, i) =>
    t.code
      ? [
          {
            filename: `ticket-${i + 1}.png`,
            cid: `ticket-${i + 1}@wristband`,
            contentType: 'image/png',
            content: t.code.png.toString('base64'),
          },
        ]
      : [],
  )
  return { to, subject, text, html, ...(attachments.length ? { attachments } : {}) }
}

// Transfer mail: one e-mail per holder link with the transfers not yet mailed. The link is the holder's,
// the transfers the ledger's; these take and give back both in one transaction.

/**
 * Takes the link's not-yet-mailed transfers for one e-mail and stores the hash of the claim token it
 * will carry, in one transaction (the job's: the stores run in it); null when the link is gone or nothing
 * is left to mail. Holds the link's row so that a transfer committed meanwhile waits for this transaction
 * (see transferMailJob). Exactly one of concurrent runners takes them (store-contract.test.ts).
 */
export async function takeTransfersToMail(
  db: Db,
  linkId: number,
  tokenHash: string,
  now: number,
  /** Runs in the transaction once the link's row is held, before the transfers are taken. */
  onLinkHeld: (tx: Db) => Promise<void>,
) {
  return db.transaction().execute(async (tx) => {
    const link = await holdLink(tx, linkId, now)
    if (!link) return null
    await onLinkHeld(tx)
    const ids = await takeUnmailed(tx, linkId, now)
    if (ids.length === 0) return null
    await insertLinkToken(tx, linkId, tokenHash, now)
    return { link, ids }
  })
}

/** Undoes takeTransfersToMail after a failed send: the transfers are mailed again, the token is dropped. */
async function releaseTakenTransfers(db: Db, ids: number[], takenAt: number, tokenHash: string) {
  await db.transaction().execute(async (tx) => {
    await releaseUnmailed(tx, ids, takenAt)
    await deleteLinkToken(tx, tokenHash)
  })
}

/**
 * Sends one e-mail with every not-yet-mailed transfer of a link. The claim token is minted here and
 * only its hash is stored, so the plaintext never rests in the database (not even in the job queue).
 *
 * Taking the transfers and releasing this job's dedupe key happen in one transaction that holds the
 * link's row: a transfer committed before it is in this e-mail; one committed after it finds no
 * pending job and schedules the next e-mail. If rendering or sending fails the transfers are released
 * again and the job is retried.
 */
export function transferMailJob(deps: TransferMailDeps): JobHandler<TransferMailPayload> {
  return {
    retrySchedule: MAIL_RETRY_SCHEDULE,
    yieldsToRequests: true,
    async run({ linkId }, { jobId, signal }) {
      const { db, clock } = deps
      const now = clock.now()
      const token = randomToken(32)
      const tokenHash = sha256Hex(token)
      const taken = await takeTransfersToMail(db, linkId, tokenHash, now, (tx) => releaseDedupeKey(tx, jobId))
      if (!taken) return
      try {
        const event = await eventName(db, taken.link.event_id)
        const tickets = await transfersToMail(db, taken.ids)
        const texts = tickets.map((t) => deps.codes.render(t.code_body))
        const images = await deps.qr.pngs(texts.filter((text) => text !== null))
        let image = 0
        const mailed = tickets.map(({ code_body: _, ...t }, i) => {
          const text = texts[i]
          return { ...t, code: text ? { text, png: images[image++]! } : null }
        })
        signal.throwIfAborted()
        await deps.mail.send(
          transferMessage(taken.link.email, event, claimLink(deps.publicBaseUrl, token), mailed),
        )
      } catch (err) {
        await releaseTakenTransfers(db, taken.ids, now, tokenHash)
        // A runner that lost its lease cannot reschedule its job: the runner that took it over found
        // these transfers taken and finished it. A new job mails them.
        if (signal.aborted) await enqueue(db, clock.now(), transferMailJobOf(linkId, clock.now()))
        throw err
      }
    },
  }
}
