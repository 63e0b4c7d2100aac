import { Type } from 'typebox'
import { SENT_ERROR_CODES } from './errors.js'

const bodyCodes = SENT_ERROR_CODES.filter((c) => c.field === 'error')

/** Body of every error other than 422. */
export const ErrorBody = Type.Object(
  {
    detail: Type.String(),
    error: Type.Optional(
      Type.String({
        // Open: codes are added in new releases, so a strict generated client must not reject one it
        // does not know (an `enum` would); the known ones are listed as an extensible enum.
        'x-extensible-enum': bodyCodes.map((c) => c.code),
        description:
          'A stable code, where a status has more than one cause (listed per operation; new codes may be added, ' +
          'so treat an unknown one as the status alone): ' +
          bodyCodes.map((c) => `\`${c.code}\` when ${c.when}`).join('; '),
      }),
    ),
  },
  {
    additionalProperties: true,
    $id: 'ErrorBody',
    description: 'Error: {"detail": "<message>"} plus named fields',
  },
)

export const HTTPValidationError = Type.Object(
  {
    detail: Type.Array(
      Type.Object({
        loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
        msg: Type.String(),
        type: Type.String(),
        input: Type.Optional(Type.Unknown()),
        ctx: Type.Optional(Type.Object({}, { additionalProperties: true })),
      }),
    ),
  },
  { $id: 'HTTPValidationError' },
)

export const RateLimited = Type.Object(
  {
    error: Type.Literal('rate_limit_exceeded'),
    detail: Type.String(),
    limit: Type.Integer(),
    retry_after: Type.Integer(),
  },
  { $id: 'RateLimited' },
)

export const Message = Type.Object({ message: Type.String() })

/** The error responses every JSON endpoint can give, to merge into a route's `response`. */
export function errorResponses(...statuses: number[]) {
  const out: Record<number, unknown> = { 422: Type.Ref('HTTPValidationError'), 429: Type.Ref('RateLimited') }
  for (const s of statuses) out[s] = Type.Ref('ErrorBody')
  return out
}
