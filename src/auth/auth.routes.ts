import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { REFRESH, tokenPair } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { LoginRequest, LoginResponse, RefreshRequest, TokenResponse } from './auth.schemas.js'
import { type LoginDeps, loginStaff } from './login.service.js'

export interface AuthRoutesDeps extends LoginDeps {
  tokens: TokenService
}

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesDeps> = async (app, deps) => {
  app.post(
    '/auth/login',
    {
      config: perMinute(10),
      schema: {
        tags: ['auth'],
        summary: 'Sign in an administrator, operator or network manager',
        description:
          'For an administrator whom PASSKEYS_REQUIRED_FOR covers, `passkey_policy` says what comes next: ' +
          '`use_passkey` (TOTP is refused; the passkey at /auth/passkey with this token gives fresh MFA) or ' +
          '`register_passkey` (register one at /admin/passkeys/registration).',
        body: LoginRequest,
        response: { 200: LoginResponse, ...errorResponses(401) },
        doc: {
          operationId: 'login',
          returns: 'An access token and a refresh token',
          request: { email: 'admin@example.com', password: 'correct horse battery staple', role: 'admin' },
          response: tokenPair,
        },
      },
    },
    async (request) => {
      const { email, password, role = 'admin' } = request.body
      return loginStaff(deps, { email, password, role }, request.ip)
    },
  )

  app.post(
    '/auth/refresh',
    {
      config: perMinute(30),
      schema: {
        tags: ['auth'],
        summary: 'Rotate a refresh token for a new token pair',
        body: RefreshRequest,
        response: { 200: TokenResponse, ...errorResponses(401) },
        doc: {
          operationId: 'refreshTokens',
          returns: 'A new token pair; the refresh token sent is spent',
          request: { refresh_token: REFRESH },
          response: tokenPair,
        },
      },
    },
    async (request) => {
      return deps.tokens.refresh(request.body.refresh_token, request.ip)
    },
  )

  app.post(
    '/auth/logout',
    {
      config: perMinute(30),
      ...protect(deps.tokens),
      schema: {
        tags: ['auth'],
        summary: 'End the session of a refresh token',
        security: [{ OAuth2PasswordBearer: [] }],
        body: RefreshRequest,
        response: { 200: Message, ...errorResponses(401) },
        doc: {
          operationId: 'logout',
          returns: 'The session is ended',
          request: { refresh_token: REFRESH },
          response: { message: 'Logged out' },
        },
      },
    },
    async (request) => {
      await deps.tokens.logout(request.body.refresh_token, claimsOf(request))
      return { message: 'Logged out' }
    },
  )
}
