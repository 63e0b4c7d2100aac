import { randomBytes } from 'node:crypto'
import type { TicketCodes } from '../edge/ticket-codes.js'
import { nextFeedSeq } from '../events/events.store.js'
import { openLink } from '../holder/holder.store.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import { ConflictError, NotFoundError } from '../platform/errors.js'
import { fromMinorUnits, toMinorUnits } from '../platform/formats.js'
import { enqueue } from '../platform/jobs/jobs.js'
import {
  findTicketType,
  findTransferByCompanyId,
  insertTicketType,
  insertTransfer,
  listTicketTypes,
} from './partner.store.js'
import type { Partner } from './partner-auth.js'
import { TRANSFER_MAIL_JOB, type TransferMailPayload } from './transfer-mail.js'

export interface PartnerServiceDeps {
  db: Db
  clock: Clock
  /** TRANSFER_EMAIL_DELAY_SECONDS */
  mailDelaySeconds: number
  /** Signs each transfer's ticket code (edge key). */
  codes: TicketCodes
}

/** 32 lowercase hexadecimal characters (128 random bits). */
const newUid = () => randomBytes(16).toString('hex')
const iso = (ms: number) => new Date(ms).toISOString()

export async function createTicketType(
  { db, clock }: PartnerServiceDeps,
  partner: Partner,
  input: { name: string; price: number; ticket_date: string },
) {
  const now = clock.now()
  const uid = newUid()
  const price = toMinorUnits(input.price)!
  await insertTicketType(db, {
    uid,
    event_id: partner.eventId,
    name: input.name,
    price,
    ticket_date: input.ticket_date,
    created_at: now,
  })
  return {
    ticket_uid: uid,
    event_uid: partner.eventUid,
    name: input.name,
    price: fromMinorUnits(price),
    ticket_date: input.ticket_date,
    created_at: iso(now),
  }
}

export async function ticketTypesOf({ db }: PartnerServiceDeps, partner: Partner) {
  const rows = await listTicketTypes(db, partner.eventId)
  return rows.map((r) => ({
    ticket_uid: r.uid,
    event_uid: partner.eventUid,
    name: r.name,
    price: fromMinorUnits(r.price),
    ticket_date: r.ticket_date,
    created_at: iso(r.created_at),
  }))
}

export interface TransferInput {
  email: string
  ticket_uid: string
  company_ticket_id: string
  balance?: number
  promo_balance?: number
  additional_info?: { access_gate?: string; seat_number?: string }
}

/**
 * Records a transfer, joins it to the open link of its address (lower-cased) and schedules the link's
 * grouped e-mail, all in one transaction. The first transfer of a burst schedules the e-mail; the
 * others find it pending (same dedupe key) and ride along.
 */
export async function createTransfer(deps: PartnerServiceDeps, partner: Partner, input: TransferInput) {
  const { db, clock } = deps
  const type = await findTicketType(db, partner.eventId, input.ticket_uid)
  if (!type) throw new NotFoundError('Unknown ticket_uid for this event')
  const now = clock.now()
  const uid = newUid()
  const email = input.email.trim().toLowerCase()
  const code = await deps.codes.issue({
    eventId: partner.eventId,
    transferUid: uid,
    ticketUid: type.uid,
    version: 1,
    issuedAt: now,
    ticketDate: type.ticket_date,
  })
  try {
    await db.transaction().execute(async (tx) => {
      const linkId = await openLink(tx, partner.eventId, email, now)
      await insertTransfer(tx, {
        uid,
        event_id: partner.eventId,
        partner_id: partner.partnerId,
        ticket_type_id: type.id,
        company_ticket_id: input.company_ticket_id,
        email,
        balance: toMinorUnits(input.balance ?? 0)!,
        promo_balance: toMinorUnits(input.promo_balance ?? 0)!,
        access_gate: input.additional_info?.access_gate ?? null,
        seat_number: input.additional_info?.seat_number ?? null,
        link_id: linkId,
        created_at: now,
        code_body: code?.body ?? null,
        code_digest: code?.digest ?? null,
        // Last, after the link's lock: see nextFeedSeq.
        feed_seq: await nextFeedSeq(tx, partner.eventId),
      })
      await enqueue(tx, now, {
        kind: TRANSFER_MAIL_JOB,
        payload: { linkId } satisfies TransferMailPayload,
        runAt: now + deps.mailDelaySeconds * 1000,
        dedupeKey: `transfer-mail:${linkId}`,
      })
    })
  } catch (err) {
    if (isUniqueViolation(err))
      throw new ConflictError(
        'company_ticket_id has already been used by this partner',
        'duplicate_company_ticket_id',
      )
    throw err
  }
  return {
    transfer_uid: uid,
    ticket_uid: type.uid,
    company_ticket_id: input.company_ticket_id,
    email,
    status: 'TRANSFERRED' as const,
    created_at: iso(now),
    ticket_code: code?.code ?? null,
  }
}

export async function transferByCompanyId({ db, codes }: PartnerServiceDeps, partner: Partner, id: string) {
  const t = await findTransferByCompanyId(db, partner.partnerId, id)
  if (!t) throw new NotFoundError('No transfer with this company_ticket_id')
  return {
    transfer_uid: t.uid,
    event_uid: partner.eventUid,
    ticket_uid: t.ticket_uid,
    company_ticket_id: t.company_ticket_id,
    email: t.email,
    balance: fromMinorUnits(t.balance),
    promo_balance: fromMinorUnits(t.promo_balance),
    additional_info: {
      ...(t.access_gate !== null ? { access_gate: t.access_gate } : {}),
      ...(t.seat_number !== null ? { seat_number: t.seat_number } : {}),
    },
    status: t.status as 'TRANSFERRED' | 'CLAIMED' | 'USED',
    claimed: t.claimed_at !== null,
    emailed: t.mailed_at !== null,
    used_timestamp: t.used_timestamp,
    created_at: iso(t.created_at),
    ticket_code: codes.render(t.code_body),
  }
}
