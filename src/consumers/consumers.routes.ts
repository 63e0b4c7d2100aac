import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { TokenResponse } from '../auth/auth.schemas.js'
import { ForbiddenError } from '../platform/errors.js'
import type { SecretKeys } from '../platform/keys.js'
import { consumerTokenPair, tokenPair } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { hasScope } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import { consumerView } from './consumers.openapi.js'
import {
  ConsumerProfile,
  ConsumerProfilePatch,
  CustomerLoginRequest,
  MessagingCheckRequest,
  MessagingCheckResponse,
  MessagingStartRequest,
  MessagingStartResponse,
  PhoneLoginRequest,
  RegisterRequest,
  VerifyOTPRequest,
} from './consumers.schemas.js'
import { type ConsumerDeps, ConsumerService, type ConsumerView } from './consumers.service.js'
import { normalizePhone } from './phone.js'

/** docs/specification.md: holder endpoints, the consumer's own, allow 120 per minute. */
const HOLDER_LIMIT = 120

export interface ConsumerRoutesDeps extends Omit<ConsumerDeps, 'log' | 'phoneCodeKey'> {
  /** One-time phone codes are kept under the `phone-codes` key. */
  keys: SecretKeys
}

export const consumerRoutes: FastifyPluginAsyncTypebox<ConsumerRoutesDeps> = async (app, deps) => {
  const { tokens } = deps
  // SMS bypass the job queue on purpose: a queued message would keep a live one-time code in plain text.
  const phoneCodeKey = deps.keys.key('phone-codes')
  const consumers = new ConsumerService({ ...deps, phoneCodeKey, log: app.log })
  // SMS still being sent finish before the database closes.
  app.addHook('onClose', () => consumers.drain())
  app.post(
    '/auth/login/customer',
    {
      config: perMinute(10),
      schema: {
        tags: ['consumers'],
        summary: 'Sign in a consumer with phone number and password',
        body: CustomerLoginRequest,
        response: { 200: TokenResponse, ...errorResponses(401) },
        doc: {
          operationId: 'loginConsumer',
          returns: 'An access token and a refresh token for the consumer',
          request: { phone: '+31612345678', password: 'correct horse battery staple' },
          response: tokenPair,
        },
      },
    },
    async (request) => {
      const phone = await normalizePhone(request.body.phone)
      return consumers.loginWithPassword(phone, request.body.password, request.ip)
    },
  )

  app.post(
    '/auth/login/phone',
    {
      config: perMinute(30),
      schema: {
        tags: ['consumers'],
        summary: 'Send a single-use sign-in code by SMS',
        description:
          'The code has 6 digits, lives 5 minutes and dies after 5 wrong tries. The answer is the same ' +
          'whether or not the number is registered; only registered numbers get an SMS.',
        body: PhoneLoginRequest,
        response: { 200: Message, ...errorResponses() },
        doc: {
          operationId: 'sendPhoneLoginCode',
          request: { phone: '+4915112345678' },
          returns: 'Accepted; a code is sent when the number belongs to a consumer',
          response: { message: 'If the number is registered, a code has been sent' },
        },
      },
    },
    async (request) => {
      await consumers.startPhoneLogin(await normalizePhone(request.body.phone))
      return { message: 'If the number is registered, a code has been sent' }
    },
  )

  app.post(
    '/auth/login/phone/verify',
    {
      config: perMinute(30),
      schema: {
        tags: ['consumers'],
        summary: 'Sign in a consumer with the code sent by SMS',
        body: VerifyOTPRequest,
        response: { 200: TokenResponse, ...errorResponses(401) },
        doc: {
          operationId: 'loginConsumerWithPhoneCode',
          request: { phone: '+4915112345678', code: '381924' },
          returns: 'An access token and a refresh token for the consumer',
          response: consumerTokenPair,
        },
      },
    },
    async (request) => {
      const phone = await normalizePhone(request.body.phone)
      return consumers.verifyPhoneLogin(phone, request.body.code, request.ip)
    },
  )

  app.post(
    '/verify/messaging/start',
    {
      config: perMinute(5),
      schema: {
        tags: ['consumers'],
        summary: 'Send a code by SMS to prove ownership of a phone number',
        body: MessagingStartRequest,
        response: { 200: MessagingStartResponse, ...errorResponses(503) },
        doc: {
          operationId: 'startPhoneVerification',
          request: { phone: '+4915112345678' },
          returns: 'A code is sent by SMS',
          response: { status: 'pending' },
        },
      },
    },
    async (request) => {
      await consumers.startVerification(await normalizePhone(request.body.phone))
      return { status: 'pending' as const }
    },
  )

  app.post(
    '/verify/messaging/check',
    {
      config: perMinute(30),
      schema: {
        tags: ['consumers'],
        summary: 'Check the code and obtain a verification token for registration',
        body: MessagingCheckRequest,
        response: { 200: MessagingCheckResponse, ...errorResponses(400) },
        doc: {
          operationId: 'checkPhoneVerification',
          request: { phone: '+4915112345678', code: '381924' },
          returns: 'The verification token for POST /auth/register',
          response: { status: 'approved', verification_token: 'vt_Jx2m9QeR4tYb7LpW0sKd3nA6' },
        },
      },
    },
    async (request) => {
      const phone = await normalizePhone(request.body.phone)
      const verification_token = await consumers.checkVerification(phone, request.body.code)
      return { status: 'approved' as const, verification_token }
    },
  )

  app.post(
    '/auth/register',
    {
      config: perMinute(10),
      schema: {
        tags: ['consumers'],
        summary: 'Register a consumer with a verified phone number',
        body: RegisterRequest,
        response: { 200: TokenResponse, ...errorResponses(400, 409) },
        doc: {
          operationId: 'registerConsumer',
          request: {
            phone: '+4915112345678',
            password: 'correct horse battery staple',
            verification_token: 'vt_Jx2m9QeR4tYb7LpW0sKd3nA6',
            email: 'holder@example.com',
            first_name: 'Alex',
            last_name: 'Meyer',
          },
          returns: 'The consumer is registered',
          response: consumerTokenPair,
        },
      },
    },
    async (request) => {
      const phone = await normalizePhone(request.body.phone)
      return consumers.register({ ...request.body, phone }, request.ip)
    },
  )

  const consumerOnly = protect(tokens, { roles: ['consumer'] })
  const requireScope = (scope: string) => async (request: Parameters<typeof claimsOf>[0]) => {
    if (!hasScope(claimsOf(request), '*', scope)) throw new ForbiddenError()
  }
  const view = ({ created_at, ...rest }: ConsumerView) => ({
    ...rest,
    created_at: new Date(created_at).toISOString(),
  })

  app.get(
    '/consumers/me',
    {
      config: perMinute(HOLDER_LIMIT),
      preParsing: consumerOnly.preParsing,
      preHandler: [consumerOnly.preHandler, requireScope('profile:read')],
      schema: {
        tags: ['consumers'],
        summary: 'The signed-in consumer',
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: ConsumerProfile, ...errorResponses(401, 403) },
        doc: {
          operationId: 'getCurrentConsumer',
          returns: 'The signed-in consumer',
          response: consumerView,
        },
      },
    },
    async (request) => view(await consumers.profile(Number(claimsOf(request).sub))),
  )

  app.patch(
    '/consumers/me',
    {
      config: perMinute(HOLDER_LIMIT),
      preParsing: consumerOnly.preParsing,
      preHandler: [consumerOnly.preHandler, requireScope('profile:write')],
      schema: {
        tags: ['consumers'],
        summary: "Change the signed-in consumer's profile",
        security: [{ OAuth2PasswordBearer: [] }],
        body: ConsumerProfilePatch,
        response: { 200: ConsumerProfile, ...errorResponses(401, 403) },
        doc: {
          operationId: 'updateCurrentConsumer',
          request: { email: 'holder@example.com', first_name: 'Alex', last_name: null },
          returns: 'The profile as changed',
          response: { ...consumerView, last_name: null },
        },
      },
    },
    async (request) => view(await consumers.updateProfile(Number(claimsOf(request).sub), request.body)),
  )
}
