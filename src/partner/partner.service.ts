import { randomBytes } from 'node:crypto'
import type { TicketCodes } from '../edge/ticket-codes.js'
import { openLink, openLinks } from '../holder/holder.store.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import {
  AppError,
  ConflictError,
  errorBody,
  NotFoundError,
  type ValidationIssue,
} from '../platform/errors.js'
import { fromMinorUnits, toMinorUnits } from '../platform/formats.js'
import { enqueue, enqueueMany } from '../platform/jobs/jobs.js'
import {
  findTransferByCompanyId,
  issueTransfer,
  issueTransfers,
  transferCodeBodies,
  usedCompanyTicketIds,
} from '../transfers/transfers.store.js'
import type { Keeping } from './idempotency.js'
import { findTicketType, findTicketTypes, insertTicketType, listTicketTypes } from './partner.store.js'
import type { Partner } from './partner-auth.js'
import { transferMailJobOf } from './transfer-mail.js'

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
    event_timezone: partner.eventTimezone,
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
    event_timezone: partner.eventTimezone,
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

const duplicate = () =>
  new ConflictError('company_ticket_id has already been used by this partner', 'duplicate_company_ticket_id')

/** The stored row of a new transfer (its link to be set). */
function transferRow(
  partner: Partner,
  uid: string,
  type: { id: number },
  input: TransferInput,
  email: string,
  now: number,
  code: { body: string; digest: string } | null,
) {
  return {
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
    created_at: now,
    code_body: code?.body ?? null,
    code_digest: code?.digest ?? null,
  }
}

/** The 201 answer of a transfer. */
function transferCreated(
  partner: Partner,
  uid: string,
  type: { uid: string },
  input: TransferInput,
  email: string,
  now: number,
  code: { code: string } | null,
) {
  return {
    transfer_uid: uid,
    ticket_uid: type.uid,
    company_ticket_id: input.company_ticket_id,
    email,
    status: 'TRANSFERRED' as const,
    event_timezone: partner.eventTimezone,
    created_at: iso(now),
    ticket_code: code?.code ?? null,
  }
}

/** The first ticket code (version 1) of a new transfer; null without an edge key. */
const firstCode = (
  deps: PartnerServiceDeps,
  partner: Partner,
  uid: string,
  type: { uid: string; ticket_date: string },
  now: number,
) =>
  deps.codes.issue({
    eventId: partner.eventId,
    transferUid: uid,
    ticketUid: type.uid,
    version: 1,
    issuedAt: now,
    ticketDate: type.ticket_date,
  })

/** The grouped e-mail of a link, after the configured delay. */
const mailJob = (deps: PartnerServiceDeps, linkId: number, now: number) =>
  transferMailJobOf(linkId, now + deps.mailDelaySeconds * 1000)

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
  const code = await firstCode(deps, partner, uid, type, now)
  try {
    await db.transaction().execute(async (tx) => {
      const linkId = await openLink(tx, partner.eventId, email, now)
      // After the link's lock: the ledger takes the event's feed position last.
      await issueTransfer(tx, {
        ...transferRow(partner, uid, type, input, email, now, code),
        link_id: linkId,
      })
      await enqueue(tx, now, mailJob(deps, linkId, now))
    })
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicate()
    throw err
  }
  return transferCreated(partner, uid, type, input, email, now, code)
}

/** One transfer of a batch: its 201 answer, or its error as that status's body. */
export type BatchResult =
  | { company_ticket_id: string; status: 201; transfer: ReturnType<typeof transferCreated> }
  | {
      company_ticket_id: string
      status: number
      error: { detail: string | ValidationIssue[]; error?: string }
    }

const failed = (input: TransferInput, err: AppError): BatchResult => ({
  company_ticket_id: input.company_ticket_id,
  status: err.statusCode,
  error: errorBody(err) as { detail: string | ValidationIssue[]; error?: string },
})

/**
 * Up to 500 transfers, each answered on its own: 201 with what POST /companies/transfer answers, or
 * the error it would have answered (404 unknown ticket_uid, 409 duplicate_company_ticket_id, 422 an
 * amount with more than two decimals). The valid ones are written in one transaction (links locked
 * in address order, one feed reservation, one e-mail job per link), so 500 transfers cost a few
 * statements, not 500 transactions. A company_ticket_id taken meanwhile by a concurrent request makes
 * the batch fall back to one transfer at a time, which answers that one 409.
 */
export async function createTransfers(
  deps: PartnerServiceDeps,
  partner: Partner,
  inputs: TransferInput[],
): Promise<BatchResult[]> {
  const { db, clock } = deps
  // The inputs passed the route's checks (schema and amounts): what is left is the catalogue and the ledger.
  const results: (BatchResult | undefined)[] = inputs.map(() => undefined)
  const types = await findTicketTypes(db, partner.eventId, [...new Set(inputs.map((t) => t.ticket_uid))])
  const used = await usedCompanyTicketIds(db, partner.partnerId, [
    ...new Set(inputs.map((t) => t.company_ticket_id)),
  ])
  const now = clock.now()
  const todo: { i: number; input: TransferInput; type: { id: number; uid: string; ticket_date: string } }[] =
    []
  inputs.forEach((input, i) => {
    if (results[i]) return
    const type = types.get(input.ticket_uid)
    if (!type) results[i] = failed(input, new NotFoundError('Unknown ticket_uid for this event'))
    else if (used.has(input.company_ticket_id)) results[i] = failed(input, duplicate())
    else {
      used.add(input.company_ticket_id)
      todo.push({ i, input, type })
    }
  })
  const made = await Promise.all(
    todo.map(async ({ input, type }) => {
      const uid = newUid()
      const code = await firstCode(deps, partner, uid, type, now)
      return { uid, code, email: input.email.trim().toLowerCase() }
    }),
  )
  try {
    await db.transaction().execute(async (tx) => {
      // Links in address order, so two batches lock them in the same order; the ledger takes the
      // event's feed positions after them.
      const links = await openLinks(tx, partner.eventId, [...new Set(made.map((m) => m.email))].sort(), now)
      await issueTransfers(
        tx,
        partner.eventId,
        todo.map(({ input, type }, n) => ({
          ...transferRow(partner, made[n]!.uid, type, input, made[n]!.email, now, made[n]!.code),
          link_id: links.get(made[n]!.email)!,
        })),
      )
      await enqueueMany(
        tx,
        now,
        [...links.values()].map((linkId) => mailJob(deps, linkId, now)),
      )
    })
  } catch (err) {
    if (!isUniqueViolation(err)) throw err
    for (const { i, input } of todo)
      results[i] = await createTransfer(deps, partner, input).then(
        (transfer) => ({ company_ticket_id: input.company_ticket_id, status: 201 as const, transfer }),
        (e: unknown) => {
          if (e instanceof AppError && e.statusCode < 500) return failed(input, e)
          throw e
        },
      )
    return results as BatchResult[]
  }
  todo.forEach(({ i, input, type }, n) => {
    const m = made[n]!
    results[i] = {
      company_ticket_id: input.company_ticket_id,
      status: 201,
      transfer: transferCreated(partner, m.uid, type, input, m.email, now, m.code),
    }
  })
  return results as BatchResult[]
}

type TransferAnswer = ReturnType<typeof transferCreated>

/**
 * Transfer answers with the current code of each transfer (its latest re-issue), whatever code they
 * held: null for a transfer without one (or gone). Codes are rendered from the stored signing input,
 * as every read of a code is.
 */
async function withCurrentCodes(
  { db, codes }: PartnerServiceDeps,
  partner: Partner,
  answers: TransferAnswer[],
): Promise<TransferAnswer[]> {
  const bodies = await transferCodeBodies(
    db,
    partner.partnerId,
    answers.map((a) => a.transfer_uid),
  )
  // The time zone too: records kept before answers carried it are replayed whole.
  return answers.map((a) => ({
    ...a,
    event_timezone: partner.eventTimezone,
    ticket_code: codes.render(bodies.get(a.transfer_uid) ?? null),
  }))
}

const withoutCode = (a: TransferAnswer): TransferAnswer => ({ ...a, ticket_code: null })

/** The Idempotency-Key record of POST /companies/transfer: kept without its code, replayed with the current one. */
export const transferKeeping = (deps: PartnerServiceDeps, partner: Partner): Keeping<TransferAnswer> => ({
  keep: withoutCode,
  replay: async (kept) => (await withCurrentCodes(deps, partner, [kept]))[0]!,
})

/**
 * The Idempotency-Key record of POST /companies/transfers: the made transfers kept without their codes
 * and replayed with their current ones; the errors are kept and replayed as they were answered.
 */
export const batchKeeping = (
  deps: PartnerServiceDeps,
  partner: Partner,
): Keeping<{ results: BatchResult[] }> => ({
  keep: ({ results }) => ({
    results: results.map((r) => ('transfer' in r ? { ...r, transfer: withoutCode(r.transfer) } : r)),
  }),
  replay: async ({ results }) => {
    const made = results.flatMap((r) => ('transfer' in r ? [r.transfer] : []))
    const current = new Map(
      (await withCurrentCodes(deps, partner, made)).map((a) => [a.transfer_uid, a] as const),
    )
    return {
      results: results.map((r) =>
        'transfer' in r ? { ...r, transfer: current.get(r.transfer.transfer_uid)! } : r,
      ),
    }
  },
})

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
    used_at: t.used_at === null ? null : iso(Number(t.used_at)),
    event_timezone: partner.eventTimezone,
    created_at: iso(t.created_at),
    ticket_code: codes.render(t.code_body),
  }
}
