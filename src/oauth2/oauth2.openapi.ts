/**
 * The oauth2 feature's OpenAPI texts that are no one route's: its tags' descriptions and the example values
 * and error cases its routes share. Each route's own texts (operationId, what it answers, examples, `error`
 * codes) are in its schema's `doc`.
 */

import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

export const INVALID_REQUEST: ErrorCase[] = [
  {
    code: 'invalid_request',
    when: 'the `token` parameter is missing or empty, a parameter is repeated, or a value is not a string or too long (RFC 6749 section 5.2)',
    detail: 'The token parameter is missing',
    extra: { error_description: 'The token parameter is missing' },
  },
]

export const OAUTH2_OPENAPI: FeatureOpenApi = {
  tags: {
    oauth2:
      'The standard endpoints (RFC 7662 introspection, RFC 7009 revocation, RFC 8414 metadata) for OAuth libraries and gateways',
  },
}
