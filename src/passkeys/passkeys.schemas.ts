import { Type } from 'typebox'

/**
 * WebAuthn's JSON forms (the browser's `PublicKeyCredential.toJSON()`, @simplewebauthn/browser's
 * answers) are checked by @simplewebauthn/server; the schema bounds their size and names the fields
 * it needs, and lets the rest through for the library to judge.
 */
const b64url = (maxLength: number) => Type.String({ maxLength, pattern: '^[A-Za-z0-9_-]*={0,2}$' })

const ClientExtensions = Type.Object({}, { additionalProperties: true })

export const RegistrationCredential = Type.Object(
  {
    id: b64url(1400),
    rawId: b64url(1400),
    type: Type.Literal('public-key'),
    response: Type.Object(
      {
        clientDataJSON: b64url(4096),
        attestationObject: b64url(16384),
        transports: Type.Optional(Type.Array(Type.String({ maxLength: 32 }), { maxItems: 10 })),
      },
      { additionalProperties: true },
    ),
    clientExtensionResults: ClientExtensions,
    authenticatorAttachment: Type.Optional(
      Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')]),
    ),
  },
  { additionalProperties: true, description: "The authenticator's answer (`PublicKeyCredential.toJSON()`)" },
)

export const AuthenticationCredential = Type.Object(
  {
    id: b64url(1400),
    rawId: b64url(1400),
    type: Type.Literal('public-key'),
    response: Type.Object(
      {
        clientDataJSON: b64url(4096),
        authenticatorData: b64url(4096),
        signature: b64url(2048),
        userHandle: Type.Optional(b64url(256)),
      },
      { additionalProperties: true },
    ),
    clientExtensionResults: ClientExtensions,
    authenticatorAttachment: Type.Optional(
      Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')]),
    ),
  },
  { additionalProperties: true, description: "The authenticator's answer (`PublicKeyCredential.toJSON()`)" },
)

const Flow = Type.String({
  minLength: 20,
  maxLength: 100,
  description: 'The flow token of the options answer: the challenge is bound to it and good for one answer',
})

export const OptionsAnswer = Type.Object({
  flow: Flow,
  options: Type.Object(
    {},
    {
      additionalProperties: true,
      description:
        'WebAuthn options in their JSON form, for `navigator.credentials.create()` / `.get()` (or @simplewebauthn/browser)',
    },
  ),
})

export const RegistrationRequest = Type.Object(
  {
    flow: Flow,
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'A name to tell passkeys apart' }),
    ),
    response: RegistrationCredential,
    password: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        description:
          "The account's current password: required for its first passkey (400 `password` without it or " +
          'when it is wrong, counted on the password back-off); ignored once the account has one.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const SignInRequest = Type.Object(
  { flow: Flow, response: AuthenticationCredential },
  { additionalProperties: false },
)

export const Passkey = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  created_at: Type.Integer({ description: 'epoch milliseconds' }),
  last_used_at: Type.Union([Type.Integer(), Type.Null()], { description: 'epoch milliseconds' }),
  backed_up: Type.Boolean({ description: 'The authenticator syncs it (a multi-device passkey)' }),
  transports: Type.Array(Type.String()),
})

export const PasskeyList = Type.Array(Passkey)

export const PasskeyIdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) })
