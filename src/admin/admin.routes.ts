import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { AdminService, type AdminServiceDeps } from './admin.service.js'

export const AdminProfile = Type.Object({
  id: Type.Integer(),
  email: Type.String(),
  role: Type.String(),
  event_ids: Type.Array(Type.Integer()),
  is_two_factor_authentication_enabled: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
})

export interface AdminRoutesDeps extends AdminServiceDeps {
  tokens: TokenService
}

export const adminRoutes: FastifyPluginAsyncTypebox<AdminRoutesDeps> = async (app, deps) => {
  const { tokens } = deps
  const admins = new AdminService(deps)
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
        doc: {
          operationId: 'getCurrentAdmin',
          returns: 'The signed-in account',
          response: {
            id: 1,
            email: 'admin@example.com',
            role: 'admin',
            event_ids: [1],
            is_two_factor_authentication_enabled: true,
            created_at: '2026-03-02T08:00:00.000Z',
          },
        },
      },
    },
    async (request) => admins.profile(Number(claimsOf(request).sub)),
  )
}
