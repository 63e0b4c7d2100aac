/**
 * The consumers feature's OpenAPI texts that are no one route's: its tags' descriptions and the example
 * values and error cases its routes share. Each route's own texts (operationId, what it answers, examples,
 * `error` codes) are in its schema's `doc`.
 */

import { AT } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const consumerView = {
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
}
