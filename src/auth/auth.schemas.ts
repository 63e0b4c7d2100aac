import { Type } from 'typebox'

export const LoginRequest = Type.Object(
  {
    email: Type.String({ maxLength: 254 }),
    password: Type.String({ maxLength: 256 }),
    event_id: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    role: Type.Optional(
      Type.Union([Type.Literal('admin'), Type.Literal('operator'), Type.Literal('network_manager')], {
        description:
          'Which kind of account signs in; default `admin`. An operator or network manager must send it: ' +
          'without it their e-mail is looked up among administrators and the answer is the same 401 ' +
          '"Incorrect email or password" as for a wrong password.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const TokenResponse = Type.Object(
  {
    access_token: Type.String(),
    refresh_token: Type.String(),
    token_type: Type.String({ default: 'bearer' }),
    expires_in: Type.Integer(),
  },
  {},
)

export const RefreshRequest = Type.Object(
  { refresh_token: Type.String({ maxLength: 4096 }) },
  { additionalProperties: false },
)

/**
 * The sign-in's answer: a token pair, and for an administrator whom PASSKEYS_REQUIRED_FOR covers, what
 * the policy asks next: `use_passkey` (a TOTP code is refused: give the passkey at /auth/passkey with
 * this access token) or `register_passkey` (register one at /admin/passkeys/registration).
 */
export const LoginResponse = Type.Object({
  ...TokenResponse.properties,
  passkey_policy: Type.Optional(
    Type.Union([Type.Literal('use_passkey'), Type.Literal('register_passkey')], {
      description: 'PASSKEYS_REQUIRED_FOR: what the account must do next',
    }),
  ),
})
