import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { parseEventIds } from '../identities/grants.js'
import { findAdminProfile } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'

export const AdminProfile = Type.Object({
  id: Type.Integer(),
  email: Type.String(),
  role: Type.String(),
  event_ids: Type.Array(Type.Integer()),
  is_two_factor_authentication_enabled: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
})

export const adminRoutes: FastifyPluginAsyncTypebox<{ tokens: TokenService; db: Db }> = async (
  app,
  { tokens, db },
) => {
  app.get(
    '/admin/me',
    {
      config: perMinute(60),
      ...protect(tokens, { roles: ['admin'] }),
      schema: {
        tags: ['admin'],
        summary: 'The signed-in administrator',
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: AdminProfile, ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const r = await findAdminProfile(db, Number(claims.sub))
      if (!r) throw new UnauthorizedError()
      return {
        id: r.id,
        email: r.email,
        role: r.role,
        event_ids: parseEventIds(r.event_ids),
        is_two_factor_authentication_enabled: r.is_two_factor_authentication_enabled === 1,
        created_at: new Date(r.created_at).toISOString(),
      }
    },
  )
}
