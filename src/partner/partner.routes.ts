import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type {
  FastifyReply,
  FastifyRequest,
  FastifySchemaValidationError,
  preHandlerAsyncHookHandler,
} from 'fastify'
import { qrRenderer } from '../edge/qr.js'
import type { Config } from '../platform/config.js'
import { errorBody, ValidationFailed, type ValidationIssue } from '../platform/errors.js'
import { isRealLocalDateTime, moneyIssue } from '../platform/formats.js'
import type { JobRunner } from '../platform/jobs/jobs.js'
import {
  AT,
  EVENT,
  TICKET_CODE,
  TICKET_UID,
  TIMEZONE,
  TRANSFER_UID,
  USED_LOCAL,
  USED_UTC,
} from '../platform/openapi-examples.js'
import { errorResponses } from '../platform/schemas.js'
import { createValidatorCompiler, type PutOffSchemas, toValidationIssues } from '../platform/validation.js'
import { idempotent, type Keeping } from './idempotency.js'
import { idempotencyInUse, ticketType, transferView } from './partner.openapi.js'
import {
  type BatchItemError,
  type BatchItemResult,
  CompanyTicketIdParams,
  IdempotencyHeaders,
  TicketListQuery,
  TicketType,
  TicketTypeList,
  TicketTypeRequest,
  TransferBatchRequest,
  TransferBatchResult,
  TransferCreated,
  TransferDetail,
  TransferItem,
  TransferRequest,
} from './partner.schemas.js'
import {
  batchKeeping,
  createTicketType,
  createTransfer,
  createTransfers,
  type PartnerServiceDeps,
  type TransferInput,
  ticketTypesOf,
  transferByCompanyId,
  transferKeeping,
} from './partner.service.js'
import { type Partner, type PartnerAuthDeps, partnerAuth, partnerOf } from './partner-auth.js'
import { TRANSFER_MAIL_JOB, type TransferMailDeps, transferMailJob } from './transfer-mail.js'

const security = [{ APIKeyHeader: [] }]

/**
 * The checks a JSON schema cannot state exactly: amounts with at most two decimals (a float
 * `multipleOf` gets 19.99 wrong) and real calendar dates. They run as validation, before the 403 checks.
 */
function checkValues(fields: string[], dateField?: string): preHandlerAsyncHookHandler {
  return async (request) => {
    const body = request.body as Record<string, unknown>
    const issues: ValidationIssue[] = []
    for (const f of fields) {
      const issue = moneyIssue(f, body[f])
      if (issue) issues.push(issue)
    }
    const date = dateField ? body[dateField] : undefined
    if (typeof date === 'string' && !isRealLocalDateTime(date))
      issues.push({
        loc: ['body', dateField!],
        msg: 'Value error, not a real calendar date and time',
        type: 'value_error',
        input: date,
      })
    if (issues.length) throw new ValidationFailed(issues)
  }
}

const MONEY_FIELDS = ['balance', 'promo_balance']

/**
 * The batch's validation: the route's schema checks the outer object (`event_uid`, 1 to 500
 * transfers) and leaves each transfer to `checkTransfer`, so that one transfer that breaks its schema
 * is answered 422 in its own result, as POST /companies/transfer would answer it, and the others are
 * made. The document still shows the whole schema.
 */
function batchValidation(putOff: PutOffSchemas) {
  const compile = createValidatorCompiler(putOff)
  const outer = structuredClone(TransferBatchRequest) as { properties: { transfers: { items: unknown } } }
  outer.properties.transfers.items = {}
  const item = compile({
    schema: TransferItem,
    httpPart: 'body',
    method: 'POST',
    url: '/companies/transfers (each transfer)',
  })
  return {
    validatorCompiler: (route: Parameters<typeof compile>[0]) =>
      compile({ ...route, schema: route.httpPart === 'body' ? outer : route.schema }),
    /** A transfer as given, or its 422 with `loc` from the batch's body. */
    checkTransfer(given: unknown, i: number): TransferInput | ValidationIssue[] {
      const at = (issue: ValidationIssue): ValidationIssue => ({
        ...issue,
        loc: ['body', 'transfers', i, ...issue.loc.slice(1)],
      })
      if (!item(given))
        return toValidationIssues(item.errors as FastifySchemaValidationError[], 'body', given).map(at)
      const input = given as TransferInput
      const money = MONEY_FIELDS.flatMap((f) => moneyIssue(f, input[f as keyof TransferInput]) ?? [])
      return money.length ? money.map(at) : input
    },
  }
}

export interface PartnerRoutesDeps
  extends Omit<PartnerServiceDeps, 'mailDelaySeconds'>,
    Omit<TransferMailDeps, keyof PartnerServiceDeps | 'publicBaseUrl' | 'qr'> {
  /** The job queue, which sends the grouped transfer mail (the feature registers its job here). */
  jobs: JobRunner
  config: Pick<Config, 'PARTNER_RATE_LIMIT' | 'TRANSFER_EMAIL_DELAY_SECONDS' | 'PUBLIC_BASE_URL'>
  apiKeys: PartnerAuthDeps['apiKeys']
}

export const partnerRoutes: FastifyPluginAsyncTypebox<PartnerRoutesDeps> = async (app, given) => {
  const { config } = given
  const qr = qrRenderer()
  app.addHook('onClose', () => qr.close())
  const deps: PartnerServiceDeps & TransferMailDeps & PartnerAuthDeps & PartnerRoutesDeps = {
    ...given,
    partnerRateLimit: config.PARTNER_RATE_LIMIT,
    mailDelaySeconds: config.TRANSFER_EMAIL_DELAY_SECONDS,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    qr,
  }
  deps.jobs.register(TRANSFER_MAIL_JOB, transferMailJob(deps))
  const write = partnerAuth(deps, 'write')
  const read = partnerAuth(deps, 'read')

  /** A partner write: 201 with what `create` made, once per Idempotency-Key (see `idempotent`). */
  const createdOnce = <T>(
    request: FastifyRequest,
    reply: FastifyReply,
    create: (partner: Partner) => Promise<T>,
    keeping?: (partner: Partner) => Keeping<T>,
  ) => {
    const partner = partnerOf(request)
    return idempotent(
      deps,
      request,
      reply,
      partner.keyId,
      async () => ({ status: 201, body: await create(partner) }),
      keeping?.(partner),
    )
  }

  app.post(
    '/companies/ticket',
    {
      config: write.config,
      preParsing: write.preParsing,
      preHandler: [checkValues(['price'], 'ticket_date'), write.preHandler],
      schema: {
        tags: ['partner'],
        summary: 'Add a ticket type to the event catalogue',
        security,
        headers: IdempotencyHeaders,
        body: TicketTypeRequest,
        response: { 201: TicketType, ...errorResponses(401, 403, 409) },
        doc: {
          operationId: 'createTicketType',
          returns: 'The ticket type created (or, for a repeated Idempotency-Key, the first answer again)',
          request: {
            event_uid: EVENT,
            name: 'Weekend pass',
            price: 149.5,
            ticket_date: '2026-07-18T20:00:00.000',
          },
          response: ticketType,
          errors: { 409: [idempotencyInUse] },
        },
      },
    },
    async (request, reply) =>
      createdOnce(request, reply, (partner) => createTicketType(deps, partner, request.body)),
  )

  app.get(
    '/companies/tickets',
    {
      ...read,
      schema: {
        tags: ['partner'],
        summary: "The ticket types of the API key's event",
        security,
        querystring: TicketListQuery,
        response: { 200: TicketTypeList, ...errorResponses(401, 403) },
        doc: {
          operationId: 'listTicketTypes',
          returns: "The ticket types of the key's event",
          response: { tickets: [ticketType] },
        },
      },
    },
    async (request) => ({ tickets: await ticketTypesOf(deps, partnerOf(request)) }),
  )

  app.post(
    '/companies/transfer',
    {
      config: write.config,
      preParsing: write.preParsing,
      preHandler: [checkValues(['balance', 'promo_balance']), write.preHandler],
      schema: {
        tags: ['partner'],
        summary: 'Send a ticket to a holder by e-mail',
        description:
          'A company_ticket_id this partner already used answers 409 with `"error": "duplicate_company_ticket_id"`; ' +
          "another partner's identifiers are never compared (partners are isolated).",
        security,
        headers: IdempotencyHeaders,
        body: TransferRequest,
        response: { 201: TransferCreated, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'createTransfer',
          returns: 'The ticket is sent (or, for a repeated Idempotency-Key, the first answer again)',
          request: {
            event_uid: EVENT,
            email: 'holder@example.com',
            ticket_uid: TICKET_UID,
            company_ticket_id: 'order-1042-1',
            balance: 20,
            promo_balance: 5,
            additional_info: { access_gate: 'North' },
          },
          response: transferView,
          errors: {
            409: [
              {
                code: 'duplicate_company_ticket_id',
                when: 'the company_ticket_id was already used by this partner',
                detail: 'company_ticket_id has already been used by this partner',
              },
              idempotencyInUse,
            ],
          },
        },
      },
    },
    async (request, reply) =>
      createdOnce(
        request,
        reply,
        (partner) => createTransfer(deps, partner, request.body),
        (partner) => transferKeeping(deps, partner),
      ),
  )

  const batch = batchValidation(app.putOffSchemas)
  app.post(
    '/companies/transfers',
    {
      // 500 transfers of the largest size; the service-wide BODY_LIMIT_BYTES is for single requests.
      bodyLimit: 1024 * 1024,
      ...write,
      validatorCompiler: batch.validatorCompiler,
      schema: {
        tags: ['partner'],
        summary: 'Send up to 500 tickets in one request, each answered on its own',
        description:
          'Each transfer is made as by POST /companies/transfer, or answered with the error that call would have ' +
          'answered (`status` and `error` in its result): one bad transfer does not stop the others. Under one ' +
          '`Idempotency-Key` the whole batch is made once; a retry gets the same results. Transfers to one ' +
          'address are grouped into one holder e-mail, as single transfers are.',
        security,
        headers: IdempotencyHeaders,
        body: TransferBatchRequest,
        response: { 200: TransferBatchResult, ...errorResponses(401, 403, 409) },
        doc: {
          operationId: 'createTransfers',
          returns:
            'One result per transfer, in the order sent: 201 with the transfer, or the status and error body POST /companies/transfer would have answered',
          request: {
            event_uid: EVENT,
            transfers: [
              { email: 'holder@example.com', ticket_uid: TICKET_UID, company_ticket_id: 'order-1042-1' },
              {
                email: 'holder@example.com',
                ticket_uid: TICKET_UID,
                company_ticket_id: 'order-1042-2',
                balance: 20,
              },
            ],
          },
          response: {
            results: [
              {
                company_ticket_id: 'order-1042-1',
                status: 201,
                transfer: transferView,
              },
              {
                company_ticket_id: 'order-1042-2',
                status: 409,
                error: {
                  detail: 'company_ticket_id has already been used by this partner',
                  error: 'duplicate_company_ticket_id',
                },
              },
            ],
          },
          errors: { 409: [idempotencyInUse] },
        },
      },
    },
    async (request, reply) => {
      const partner = partnerOf(request)
      return idempotent(
        deps,
        request,
        reply,
        partner.keyId,
        async () => {
          const checked = (request.body.transfers as unknown[]).map(batch.checkTransfer)
          const valid = checked.filter((c): c is TransferInput => !Array.isArray(c))
          const made = (await createTransfers(deps, partner, valid)).values()
          const results = checked.map((c, i): BatchItemResult => {
            if (!Array.isArray(c)) return made.next().value!
            const id = (request.body.transfers[i] as { company_ticket_id?: unknown }).company_ticket_id
            return {
              company_ticket_id: typeof id === 'string' ? id : null,
              status: 422,
              error: errorBody(new ValidationFailed(c)) as BatchItemError,
            }
          })
          return { status: 200, body: { results } }
        },
        batchKeeping(deps, partner),
      )
    },
  )

  app.get(
    '/companies/transfer/:company_ticket_id',
    {
      ...read,
      schema: {
        tags: ['partner'],
        summary: 'A transfer by its company_ticket_id (to learn the outcome of a lost answer)',
        security,
        params: CompanyTicketIdParams,
        response: { 200: TransferDetail, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'getTransfer',
          returns: 'The transfer and its state',
          response: {
            transfer_uid: TRANSFER_UID,
            event_uid: EVENT,
            ticket_uid: TICKET_UID,
            company_ticket_id: 'order-1042-1',
            email: 'holder@example.com',
            balance: 20,
            promo_balance: 5,
            additional_info: { access_gate: 'North' },
            status: 'USED',
            claimed: true,
            emailed: true,
            used_timestamp: USED_LOCAL,
            used_at: USED_UTC,
            event_timezone: TIMEZONE,
            created_at: AT,
            ticket_code: TICKET_CODE,
          },
        },
      },
    },
    async (request) => transferByCompanyId(deps, partnerOf(request), request.params.company_ticket_id),
  )
}
