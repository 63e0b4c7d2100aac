import { Type } from 'typebox'

/** Every reason a refused scan may have (docs/gate.md, "Reasons"): closed for now. */
export const REFUSAL_REASONS = [
  'already_used',
  'product',
  'invalid_time',
  'revoked',
  'unknown',
  'wrong_event',
  'error',
] as const
export type RefusalReason = (typeof REFUSAL_REASONS)[number]

export const ReasonSchema = Type.Union(
  [
    Type.Literal('already_used'),
    Type.Literal('product'),
    Type.Literal('invalid_time'),
    Type.Literal('revoked'),
    Type.Literal('unknown'),
    Type.Literal('wrong_event'),
    Type.Literal('error'),
  ],
  {
    description:
      'Why a scan was refused (docs/gate.md, "Reasons"): `already_used` (no entry allowed now: entered already, no re-entry), `product` (ticket type not on the list), `invalid_time` (outside the list\'s windows), `revoked` (a re-issued code, refused offline), `unknown` (no such ticket), `wrong_event` (a ticket of another event), `error`',
  },
)

export const DirectionSchema = Type.Union([Type.Literal('entry'), Type.Literal('exit')], {
  description: '`entry` (the default) or `exit`; exits are always accepted and counted',
})
