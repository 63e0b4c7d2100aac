/**
 * The tokens feature's OpenAPI texts that are no one route's: its tags' descriptions (the `tokens` tag is
 * also POST /tokens/offline's). Each route's own texts (operationId, what it answers, examples, `error`
 * codes) are in its schema's `doc`.
 */

import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const TOKENS_OPENAPI: FeatureOpenApi = {
  tags: {
    tokens: 'Token checks and offline tokens',
  },
}
