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

export const EventStats = Type.Object({
  event: Type.Object({
    id: Type.Integer(),
    uid: Type.String(),
    name: Type.String(),
    timezone: Type.String(),
  }),
  generated_at: Type.String({ format: 'date-time' }),
})
