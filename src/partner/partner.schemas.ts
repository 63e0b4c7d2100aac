import { type Static, type TSchema, Type } from 'typebox'
import { LOCAL_DATE_TIME, MAX_AMOUNT } from '../platform/formats.js'
import { HTTPValidationError } from '../platform/schemas.js'

const strict = { additionalProperties: false } as const

export const EventUid = Type.String({ minLength: 1, maxLength: 100 })
const Uid32 = Type.String({ pattern: '^[0-9a-f]{32}$', description: '32 lowercase hexadecimal characters' })
const LocalDateTime = Type.String({
  pattern: LOCAL_DATE_TIME,
  description: 'Local date-time of the event, YYYY-MM-DDThh:mm:ss.SSS, no zone designator',
  examples: ['2026-07-18T20:00:00.000'],
})
const Amount = (description: string) =>
  Type.Number({ minimum: 0, maximum: MAX_AMOUNT, description: `${description}; at most two decimals` })

export const TicketTypeRequest = Type.Object(
  {
    event_uid: EventUid,
    name: Type.String({ minLength: 1, maxLength: 200 }),
    price: Amount('Price'),
    ticket_date: LocalDateTime,
  },
  strict,
)

/** The event's time zone, readable by partners. */
export const EventTimezone = Type.String({
  description:
    "The event's IANA time zone (e.g. Europe/Berlin): ticket_date and used_timestamp are local to it",
})

/** When a ticket was used, in UTC; with every event-local used_timestamp. */
export const UsedAt = Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
  description: 'When the ticket was used, UTC (ISO 8601 with Z); null while unused',
})

export const TicketType = Type.Object({
  ticket_uid: Uid32,
  event_uid: Type.String(),
  event_timezone: EventTimezone,
  name: Type.String(),
  price: Type.Number(),
  ticket_date: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
})

export const TicketTypeList = Type.Object({ tickets: Type.Array(TicketType) })

export const TicketListQuery = Type.Object({ event_uid: Type.Optional(EventUid) }, strict)

const AdditionalInfo = Type.Object(
  {
    access_gate: Type.Optional(
      Type.String({ maxLength: 100, description: 'The entrance the holder should use, shown on the ticket' }),
    ),
    seat_number: Type.Optional(Type.String({ maxLength: 100, description: 'The seat, shown on the ticket' })),
  },
  {
    ...strict,
    description:
      'What the ticket shows besides its type: exactly these two optional fields; any other is 422',
  },
)

const transferFields = {
  email: Type.String({
    maxLength: 254,
    pattern: '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$',
    description: 'Holder e-mail address; transfers are grouped by it, compared case-insensitively',
  }),
  ticket_uid: Uid32,
  company_ticket_id: Type.String({ minLength: 1, maxLength: 100 }),
  balance: Type.Optional(Amount('Balance loaded onto the holder wallet; default 0')),
  promo_balance: Type.Optional(Amount('Promotional balance; default 0')),
  additional_info: Type.Optional(AdditionalInfo),
}

export const TransferRequest = Type.Object({ event_uid: EventUid, ...transferFields }, strict)

/** One transfer of a batch: the body of POST /companies/transfer without event_uid. */
export const TransferItem = Type.Object(transferFields, strict)

export const TicketCode = Type.Union([Type.String(), Type.Null()], {
  description:
    'The signed ticket code (compact JWS, EdDSA), the content of the QR code scanners read offline; null for transfers made before ticket codes or when the service has no edge key',
})

export const TransferCreated = Type.Object({
  transfer_uid: Uid32,
  ticket_uid: Uid32,
  company_ticket_id: Type.String(),
  email: Type.String(),
  status: Type.Literal('TRANSFERRED'),
  event_timezone: EventTimezone,
  created_at: Type.String({ format: 'date-time' }),
  ticket_code: TicketCode,
})

/** POST /companies/transfers: up to 500 transfers of one event. */
export const TransferBatchRequest = Type.Object(
  {
    event_uid: EventUid,
    transfers: Type.Array(TransferItem, {
      minItems: 1,
      maxItems: 500,
      description:
        'The transfers, each as the body of POST /companies/transfer without event_uid. Each is checked on ' +
        'its own: one that breaks this schema is answered 422 in its result, the others are made',
    }),
  },
  strict,
)

const ItemError = Type.Object(
  {
    detail: Type.Union([Type.String(), HTTPValidationError.properties.detail]),
    error: Type.Optional(Type.String({ description: 'e.g. duplicate_company_ticket_id' })),
  },
  { additionalProperties: true, description: 'The error body POST /companies/transfer would have answered' },
)

const BatchMade = Type.Object(
  {
    company_ticket_id: Type.String(),
    status: Type.Literal(201),
    transfer: TransferCreated,
  },
  { ...strict, title: 'TransferBatchMade', description: 'The transfer was made' },
)

const BatchRefused = Type.Object(
  {
    company_ticket_id: Type.Union([Type.String(), Type.Null()], {
      description: 'As sent; null when the transfer had no valid company_ticket_id (a 422)',
    }),
    status: Type.Integer({
      minimum: 400,
      maximum: 499,
      description:
        'The status POST /companies/transfer would have answered: 404 unknown ticket_uid, 409 duplicate_company_ticket_id, 422 a transfer that breaks the schema or an invalid amount',
    }),
    error: ItemError,
  },
  { ...strict, title: 'TransferBatchRefused', description: 'The transfer was not made' },
)

export type BatchItemResult = Static<typeof BatchMade> | Static<typeof BatchRefused>
export type BatchItemError = Static<typeof ItemError>

export const TransferBatchResult = Type.Object({
  results: Type.Array(Type.Unsafe<BatchItemResult>({ oneOf: [BatchMade, BatchRefused] } as TSchema), {
    description: 'One result per transfer, in the order sent: made (201, `transfer`) or refused (`error`)',
  }),
})

export const TransferDetail = Type.Object({
  transfer_uid: Uid32,
  event_uid: Type.String(),
  ticket_uid: Uid32,
  company_ticket_id: Type.String(),
  email: Type.String(),
  balance: Type.Number(),
  promo_balance: Type.Number(),
  additional_info: Type.Object(
    {
      access_gate: Type.Optional(Type.String({ description: 'The entrance the holder should use' })),
      seat_number: Type.Optional(Type.String({ description: 'The seat' })),
    },
    { description: 'The additional_info sent with the transfer (only the fields that were given)' },
  ),
  status: Type.Union([Type.Literal('TRANSFERRED'), Type.Literal('CLAIMED'), Type.Literal('USED')]),
  claimed: Type.Boolean(),
  emailed: Type.Boolean(),
  used_timestamp: Type.Union([Type.String(), Type.Null()], {
    description: "When the ticket was used, in the event's local time (no offset); null while unused",
  }),
  used_at: UsedAt,
  event_timezone: EventTimezone,
  created_at: Type.String({ format: 'date-time' }),
  ticket_code: TicketCode,
})

export const CompanyTicketIdParams = Type.Object(
  { company_ticket_id: Type.String({ minLength: 1, maxLength: 100 }) },
  strict,
)

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7e]{1,255}$',
      description:
        'Makes the POST safe to retry: 1 to 255 visible ASCII characters (no spaces), e.g. your order line id, ' +
        'kept 24 hours per API key. A retry with the same key and body gets the first answer again (with ' +
        "`Idempotent-Replayed: true`), except that each `ticket_code` is the transfer's current code (the new one " +
        'after a re-issue): codes are not kept, they are rendered again. The same key with another body is 422; ' +
        'while the first is still running, 409 `idempotency_key_in_use`.',
    }),
  ),
})
