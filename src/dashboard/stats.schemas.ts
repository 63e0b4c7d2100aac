import { Type } from 'typebox'
import { RANGES } from './templates.js'

export const EventIdParams = Type.Object({ event_id: Type.Integer({ minimum: 1 }) })

export const StatsQuery = Type.Object(
  {
    range: Type.Optional(
      Type.Union(
        RANGES.map((r) => Type.Literal(r)),
        { description: 'Window of the uses-over-time series; 24h when absent' },
      ),
    ),
  },
  { additionalProperties: false },
)

const Count = Type.Integer({ minimum: 0 })
/** Amounts are JSON numbers with at most two decimals, like the partner API's price and balances. */
const Money = Type.Number({ minimum: 0 })

export const EventStats = Type.Object({
  event: Type.Object({
    id: Type.Integer(),
    uid: Type.String(),
    name: Type.String(),
    timezone: Type.String(),
  }),
  generated_at: Type.String({ format: 'date-time' }),
  totals: Type.Object({
    issued: Count,
    claimed: Count,
    used: Count,
    revenue: Money,
    balance_loaded: Money,
    promo_balance_loaded: Money,
  }),
  ticket_types: Type.Array(
    Type.Object({
      ticket_uid: Type.String(),
      name: Type.String(),
      ticket_date: Type.String(),
      price: Money,
      issued: Count,
      claimed: Count,
      used: Count,
      revenue: Money,
    }),
    { description: 'Every ticket type of the event, in creation order; revenue is price × issued' },
  ),
  uses_over_time: Type.Object(
    {
      range: Type.String(),
      bucket_seconds: Type.Integer(),
      from: Type.String({ format: 'date-time' }),
      to: Type.String({ format: 'date-time' }),
      total: Count,
      points: Type.Array(
        Type.Object({ t: Type.Integer({ description: 'start of the bucket, epoch seconds' }), count: Count }),
      ),
    },
    { description: 'Uses per time bucket over the range, empty buckets included' },
  ),
  uses_per_gate: Type.Array(
    Type.Object({
      access_gate: Type.Union([Type.String(), Type.Null()]),
      count: Count,
    }),
    { description: 'All uses of the event by gate: the gate scanned at, else the ticket’s own gate' },
  ),
  webhook: Type.Object({
    configured: Type.Boolean(),
    url: Type.Union([Type.String(), Type.Null()]),
    disabled: Type.Boolean(),
    disabled_reason: Type.Union([Type.String(), Type.Null()]),
    delivered: Count,
    pending: Type.Integer({ minimum: 0, description: 'waiting for their first attempt' }),
    failing: Type.Integer({ minimum: 0, description: 'failed at least once and still being retried' }),
    failed: Type.Integer({
      minimum: 0,
      description: 'given up after the last retry, or the receiver is gone',
    }),
    last_error: Type.Union([
      Type.Object({ at: Type.String({ format: 'date-time' }), message: Type.String() }),
      Type.Null(),
    ]),
  }),
})
