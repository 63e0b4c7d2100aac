/** What the OpenAPI document says about the consumers operations beyond their route schemas. */

import { AT, consumerTokenPair, tokenPair } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const consumerView = {
  id: 42,
  phone: '+4915112345678',
  email: 'holder@example.com',
  first_name: 'Alex',
  last_name: 'Meyer',
  has_password: true,
  identity_providers: [],
  created_at: AT,
}

export const CONSUMERS_OPENAPI: FeatureOpenApi = {
  tags: {
    consumers: 'Consumers (ticket holders with an account): sign-in, registration, profile, tickets',
  },
  operations: {
    'POST /auth/login/customer': {
      operationId: 'loginConsumer',
      returns: 'An access token and a refresh token for the consumer',
      request: { phone: '+31612345678', password: 'correct horse battery staple' },
      response: tokenPair,
    },
    'POST /auth/login/phone': {
      operationId: 'sendPhoneLoginCode',
      request: { phone: '+4915112345678' },
      returns: 'Accepted; a code is sent when the number belongs to a consumer',
      response: { message: 'If the number is registered, a code has been sent' },
    },
    'POST /auth/login/phone/verify': {
      operationId: 'loginConsumerWithPhoneCode',
      request: { phone: '+4915112345678', code: '381924' },
      returns: 'An access token and a refresh token for the consumer',
      response: consumerTokenPair,
    },
    'POST /verify/messaging/start': {
      operationId: 'startPhoneVerification',
      request: { phone: '+4915112345678' },
      returns: 'A code is sent by SMS',
      response: { status: 'pending' },
    },
    'POST /verify/messaging/check': {
      operationId: 'checkPhoneVerification',
      request: { phone: '+4915112345678', code: '381924' },
      returns: 'The verification token for POST /auth/register',
      response: { status: 'approved', verification_token: 'vt_Jx2m9QeR4tYb7LpW0sKd3nA6' },
    },
    'POST /auth/register': {
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
    'GET /consumers/me': {
      operationId: 'getCurrentConsumer',
      returns: 'The signed-in consumer',
      response: consumerView,
    },
    'PATCH /consumers/me': {
      operationId: 'updateCurrentConsumer',
      request: { email: 'holder@example.com', first_name: 'Alex', last_name: null },
      returns: 'The profile as changed',
      response: { ...consumerView, last_name: null },
    },
  },
}
