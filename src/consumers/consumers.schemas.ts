import { Type } from 'typebox'

const strict = { additionalProperties: false }

/** International format, e.g. `+4915100000001`; normalised to E.164 by the service. */
export const Phone = Type.String({
  minLength: 1,
  maxLength: 32,
  description: 'Phone number in international format (+<country code><number>); stored as E.164',
})
const Code = Type.String({ minLength: 6, maxLength: 6, description: 'The 6-digit code from the SMS' })
const Email = Type.String({ minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' })
const Name = Type.String({ minLength: 1, maxLength: 100 })

export const CustomerLoginRequest = Type.Object(
  { phone: Phone, password: Type.String({ maxLength: 256 }) },
  strict,
)

export const PhoneLoginRequest = Type.Object({ phone: Phone }, strict)

export const VerifyOTPRequest = Type.Object({ phone: Phone, code: Code }, strict)

export const MessagingStartRequest = Type.Object({ phone: Phone }, strict)
export const MessagingStartResponse = Type.Object({ status: Type.Literal('pending') })

export const MessagingCheckRequest = Type.Object({ phone: Phone, code: Code }, strict)
export const MessagingCheckResponse = Type.Object({
  status: Type.Literal('approved'),
  verification_token: Type.String({ description: 'Single use; needed by /auth/register within 15 minutes' }),
})

export const RegisterRequest = Type.Object(
  {
    phone: Phone,
    password: Type.String({ minLength: 8, maxLength: 128 }),
    verification_token: Type.String({ minLength: 1, maxLength: 256 }),
    email: Type.Optional(Email),
    first_name: Type.Optional(Name),
    last_name: Type.Optional(Name),
  },
  strict,
)

export const ConsumerProfile = Type.Object({
  id: Type.Integer(),
  phone: Type.Union([Type.String(), Type.Null()]),
  email: Type.Union([Type.String(), Type.Null()]),
  first_name: Type.Union([Type.String(), Type.Null()]),
  last_name: Type.Union([Type.String(), Type.Null()]),
  has_password: Type.Boolean(),
  identity_providers: Type.Array(Type.String(), {
    description: 'Issuers of linked identity-provider accounts',
  }),
  created_at: Type.String({ format: 'date-time' }),
})

export const ConsumerProfilePatch = Type.Object(
  {
    email: Type.Optional(Type.Union([Email, Type.Null()])),
    first_name: Type.Optional(Type.Union([Name, Type.Null()])),
    last_name: Type.Optional(Type.Union([Name, Type.Null()])),
  },
  {
    ...strict,
    description: 'Fields to change; null clears one. The phone number is changed by registering anew.',
  },
)
