import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { TokenResponse } from '../auth/auth.schemas.js'
import type { Role } from '../identities/grants.js'
import { loadGrant } from '../identities/identities.store.js'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import { UnauthorizedError } from '../platform/errors.js'
import { creationOptions, MFA_REQUIRED, requestOptions, tokenPair } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { bearerToken, claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import {
  authenticationCredential,
  PASSKEY_FLOW,
  passkeyExample,
  registrationCredential,
} from './passkeys.openapi.js'
import {
  OptionsAnswer,
  Passkey,
  PasskeyIdParams,
  PasskeyList,
  RegistrationRequest,
  SignInRequest,
} from './passkeys.schemas.js'
import {
  finishRegistration,
  finishSignIn,
  type PasskeyAccount,
  type PasskeyDeps,
  passkeysOf,
  removePasskey,
  type Subject,
  startRegistration,
  startSignIn,
} from './passkeys.service.js'

export interface PasskeyRoutesDeps extends PasskeyDeps {
  tokens: TokenService
  protectCredentials: ProtectCredentials
}

/**
 * The administrator's passkeys (`/admin/passkeys`) and sign-in with a passkey (`/auth/passkey`), for
 * administrators and network managers (dashboard users sign in at the dashboard only).
 */
export const passkeyRoutes: FastifyPluginAsyncTypebox<PasskeyRoutesDeps> = async (app, deps) => {
  const adminOnly = protect(deps.tokens, { roles: ['admin'] })

  /** The calling administrator as stored now (a disabled one is 401). */
  async function callerAccount(request: FastifyRequest): Promise<PasskeyAccount> {
    const account = await deps.accounts('admin', Number(claimsOf(request).sub))
    if (!account) throw new UnauthorizedError()
    return account
  }

  app.post(
    '/admin/passkeys/registration/options',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['passkeys'],
        summary: 'Start registering a passkey: WebAuthn creation options and the flow they belong to',
        description:
          "Attestation `none`, user verification required, resident keys preferred; the administrator's " +
          'passkeys are excluded. The challenge is good for one answer within 5 minutes, from this ' +
          'administrator, with the `flow` returned here. While MFA (TOTP or a passkey) is on, needs a fresh ' +
          '`mfa_verified_at`: 403 `mfa_required` otherwise.',
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: OptionsAnswer, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'startPasskeyRegistration',
          returns: 'WebAuthn creation options, and the flow the challenge is bound to',
          response: { flow: PASSKEY_FLOW, options: creationOptions },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => startRegistration(deps, await callerAccount(request)),
  )

  app.post(
    '/admin/passkeys/registration',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['passkeys'],
        summary: "Register a passkey: the authenticator's answer to the creation options",
        description:
          "Refused (400, audited, nothing stored) when the flow is unknown, used or another account's, or " +
          'when the answer fails a WebAuthn check: origin not in WEBAUTHN_ORIGINS, RP ID not WEBAUTHN_RP_ID, ' +
          'no user verification; the first passkey of the account without its `password`, or with a wrong ' +
          'one (400, counted on the password back-off). A credential registered already is 409. The owner ' +
          'is e-mailed a notice of every passkey added or removed.',
        security: [{ OAuth2PasswordBearer: [] }],
        body: RegistrationRequest,
        response: { 201: Passkey, ...errorResponses(400, 401, 403, 404, 409) },
        doc: {
          operationId: 'registerPasskey',
          returns: 'The passkey, stored',
          request: { flow: PASSKEY_FLOW, name: 'Work laptop', response: registrationCredential },
          response: passkeyExample,
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request, reply) => {
      const { flow, response, name, password } = request.body
      const view = await finishRegistration(
        deps,
        await callerAccount(request),
        { flow, response, name, password },
        request.ip,
      )
      return reply.code(201).send(view)
    },
  )

  app.get(
    '/admin/passkeys',
    {
      config: perMinute(60),
      ...adminOnly,
      schema: {
        tags: ['passkeys'],
        summary: "The calling administrator's passkeys",
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: PasskeyList, ...errorResponses(401, 403) },
        doc: {
          operationId: 'listPasskeys',
          returns: "The calling administrator's passkeys",
          response: [{ ...passkeyExample, last_used_at: 1782901800000 }],
        },
      },
    },
    async (request) => passkeysOf(deps, await callerAccount(request)),
  )

  app.delete(
    '/admin/passkeys/:id',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['passkeys'],
        summary: "Remove one of the calling administrator's passkeys",
        description:
          'Audited. While MFA (TOTP or a passkey) is on, needs a fresh `mfa_verified_at` (403 `mfa_required`). ' +
          "Another account's passkey is 404, as an unknown one.",
        security: [{ OAuth2PasswordBearer: [] }],
        params: PasskeyIdParams,
        response: { 200: Message, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'removePasskey',
          returns: 'The passkey is removed',
          response: { message: 'Passkey removed' },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => {
      await removePasskey(deps, await callerAccount(request), request.params.id, request.ip)
      return { message: 'Passkey removed' }
    },
  )

  /**
   * The signed-in account of an optional bearer token (the second factor after `/auth/login`): an
   * administrator or network manager; a bad token is 401 as on every protected route.
   */
  async function optionalCaller(request: FastifyRequest): Promise<Subject | undefined> {
    const token = bearerToken(request)
    if (!token) return undefined
    const claims = await deps.tokens.authenticate(token, ['access'])
    if (claims.role !== 'admin' && claims.role !== 'network_manager') throw new UnauthorizedError()
    return { kind: claims.role, id: Number(claims.sub) }
  }

  const signInDescription =
    'The bearer token is optional here. Without one: a password-less first factor (the authenticator offers its passkeys for the ' +
    "RP ID). With the access token of `/auth/login`: the second factor, the challenge bound to that account's " +
    'passkeys and to its session.'

  app.post(
    '/auth/passkey/options',
    {
      config: perMinute(10),
      schema: {
        tags: ['auth'],
        summary: 'Start signing in with a passkey: WebAuthn request options and the flow they belong to',
        description: `${signInDescription} The challenge is good for one answer within 5 minutes.`,
        response: { 200: OptionsAnswer, ...errorResponses(401, 404) },
        doc: {
          operationId: 'startPasskeySignIn',
          returns: 'WebAuthn request options, and the flow the challenge is bound to',
          response: { flow: PASSKEY_FLOW, options: requestOptions },
        },
      },
    },
    async (request) => startSignIn(deps, (await optionalCaller(request)) ?? null),
  )

  app.post(
    '/auth/passkey',
    {
      config: perMinute(10),
      schema: {
        tags: ['auth'],
        summary: 'Sign in with a passkey: the token pair of /auth/login followed by /admin/mfa/verify',
        description:
          `${signInDescription} A passkey with user verification is two factors, so the access token carries ` +
          "a fresh `mfa_verified_at`. Refused (401, audited): an unknown, used, expired or other session's " +
          "flow, a removed passkey, another account's passkey for a bound challenge, a wrong origin or RP ID, " +
          'no user verification, a signature counter that did not grow (a cloned authenticator). Tries count ' +
          "on the account's password back-off (429 while it is locked).",
        body: SignInRequest,
        response: { 200: TokenResponse, ...errorResponses(401, 404) },
        doc: {
          operationId: 'signInWithPasskey',
          returns: 'An access token with a fresh mfa_verified_at and a refresh token',
          request: { flow: PASSKEY_FLOW, response: authenticationCredential },
          response: tokenPair,
        },
      },
    },
    async (request) => {
      const caller = await optionalCaller(request)
      const { flow, response } = request.body
      const account = await finishSignIn(deps, { flow, response, caller }, request.ip)
      const grant = await loadGrant(deps.db, account.kind as Role, account.id)
      if (!grant) throw new UnauthorizedError()
      return deps.tokens.issuePair(grant, { mfa_verified_at: Math.floor(deps.clock.now() / 1000) })
    },
  )
}
