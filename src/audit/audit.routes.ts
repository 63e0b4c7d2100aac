import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { ForbiddenError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { isSuperadmin } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { AuditService, type AuditServiceDeps } from './audit.service.js'

export const AuditQuery = Type.Object({
  kind: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  actor: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  outcome: Type.Optional(
    Type.Union([Type.Literal('success'), Type.Literal('failure'), Type.Literal('denied')]),
  ),
  before: Type.Optional(Type.Integer({ minimum: 1, description: 'next_before of the previous page' })),
  limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
})

export const AuditEntry = Type.Object({
  id: Type.Integer(),
  at: Type.String({ format: 'date-time' }),
  kind: Type.String(),
  actor: Type.Union([Type.String(), Type.Null()]),
  ip: Type.Union([Type.String(), Type.Null()]),
  outcome: Type.String(),
  detail: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
})

export const AuditPage = Type.Object({
  items: Type.Array(AuditEntry),
  next_before: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Pass as `before` for the next (older) page; null on the last page',
  }),
})

export interface AuditRoutesDeps extends AuditServiceDeps {
  tokens: TokenService
}

export const auditRoutes: FastifyPluginAsyncTypebox<AuditRoutesDeps> = async (app, deps) => {
  const { tokens } = deps
  const entries = new AuditService(deps)
  app.get(
    '/admin/audit',
    {
      config: perMinute(60),
      ...protect(tokens, { roles: ['admin'] }),
      schema: {
        tags: ['audit'],
        summary: 'Security events, newest first (superadmins only)',
        description:
          'Logins, refresh-token reuse, MFA, password resets, API keys, offline tokens and rate-limit hits, ' +
          'with time, actor (`<role>:<id>` or the address tried), client address and outcome. Filter by ' +
          '`kind`, `actor` and `outcome`; page with `before`.',
        security: [{ OAuth2PasswordBearer: [] }],
        querystring: AuditQuery,
        response: { 200: AuditPage, ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      if (!isSuperadmin(claimsOf(request))) throw new ForbiddenError()
      const { limit, ...filters } = request.query
      return entries.page(filters, limit)
    },
  )
}
