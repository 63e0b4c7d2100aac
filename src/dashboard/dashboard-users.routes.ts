import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import { MFA_REQUIRED } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { dashboardUser } from './dashboard.openapi.js'
import { type DashboardUsersDeps, DashboardUsersService } from './dashboard-users.service.js'

export interface DashboardUsersRoutesDeps extends DashboardUsersDeps {
  tokens: TokenService
  protectCredentials: ProtectCredentials
}

const Username = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._@+-]+$' })
// The seed file's password rule.
const Password = Type.String({ minLength: 8, maxLength: 128 })
const EventIds = Type.Array(Type.Integer({ minimum: 1 }), { maxItems: 1000, uniqueItems: true })
// The partner's name as its API keys give it (`POST /tokens/api-key`'s `partner`).
const PARTNER_NOTE =
  "The ticket partner whose webhook receiver and deliveries the user sees on the dashboard, by the name its API keys give (in each of the user's events). Without one the user sees no partner's deliveries; event figures are the same either way."
const Partner = Type.String({ minLength: 1, maxLength: 100 })

const DashboardUser = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  event_ids: Type.Array(Type.Integer()),
  partner: Type.Union([Type.String(), Type.Null()], { description: `${PARTNER_NOTE} Null: none.` }),
  created_at: Type.String({ format: 'date-time' }),
})

const IdParams = Type.Object({ user_id: Type.Integer({ minimum: 1 }) })

/** Superadmins manage the dashboard accounts of partners here (the rules: DashboardUsersService). */
export const dashboardUsersRoutes: FastifyPluginAsyncTypebox<DashboardUsersRoutesDeps> = async (
  app,
  deps,
) => {
  const users = new DashboardUsersService(deps)
  const guard = protect(deps.tokens, { roles: ['admin'] })
  // Accounts and passwords outlive the session: fresh MFA while the superadmin's MFA is enabled.
  const credentialGuard = deps.protectCredentials({ roles: ['admin'] })
  const common = { tags: ['dashboard'], security: [{ OAuth2PasswordBearer: [] }] }
  const MFA_NOTE =
    "While the superadmin's MFA is enabled, the access token needs a fresh `mfa_verified_at` " +
    '(403 `{"detail", "error": "mfa_required"}` otherwise).'

  app.get(
    '/admin/dashboard-users',
    {
      config: perMinute(60),
      ...guard,
      schema: {
        ...common,
        summary: 'List dashboard users (superadmin)',
        response: { 200: Type.Array(DashboardUser), ...errorResponses(401, 403) },
        doc: {
          operationId: 'listDashboardUsers',
          returns: 'The dashboard users',
          response: [dashboardUser],
        },
      },
    },
    async (request) => users.list(claimsOf(request)),
  )

  app.post(
    '/admin/dashboard-users',
    {
      config: perMinute(30),
      ...credentialGuard,
      schema: {
        ...common,
        summary: 'Create a dashboard user (superadmin)',
        description: MFA_NOTE,
        body: Type.Object(
          {
            username: Username,
            password: Password,
            event_ids: EventIds,
            partner: Type.Optional(Type.Union([Partner, Type.Null()], { description: PARTNER_NOTE })),
          },
          { additionalProperties: false },
        ),
        response: { 201: DashboardUser, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'createDashboardUser',
          request: {
            username: 'acme-box-office',
            password: 'correct horse battery staple',
            event_ids: [1],
            partner: 'Acme Tickets',
          },
          returns: 'The dashboard user created',
          response: dashboardUser,
          errors: {
            ...MFA_REQUIRED,
            409: [{ code: 'username_taken', when: 'the username exists', detail: 'Username already taken' }],
          },
        },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await users.create(claimsOf(request), request.body, request.ip)),
  )

  app.patch(
    '/admin/dashboard-users/:user_id',
    {
      config: perMinute(30),
      ...credentialGuard,
      schema: {
        ...common,
        summary: 'Change the events, the partner or the password of a dashboard user (superadmin)',
        description: MFA_NOTE,
        params: IdParams,
        body: Type.Object(
          {
            password: Type.Optional(Password),
            event_ids: Type.Optional(EventIds),
            partner: Type.Optional(
              Type.Union([Partner, Type.Null()], { description: `${PARTNER_NOTE} Null unbinds the user.` }),
            ),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: DashboardUser, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'updateDashboardUser',
          request: { event_ids: [1, 2], partner: null },
          returns: 'The dashboard user as changed',
          response: { ...dashboardUser, event_ids: [1, 2], partner: null },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => users.update(claimsOf(request), request.params.user_id, request.body, request.ip),
  )

  app.delete(
    '/admin/dashboard-users/:user_id',
    {
      config: perMinute(30),
      ...credentialGuard,
      schema: {
        ...common,
        summary: 'Remove a dashboard user and end their sessions (superadmin)',
        description: MFA_NOTE,
        params: IdParams,
        response: { 200: Message, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'deleteDashboardUser',
          returns: 'The dashboard user is removed',
          response: { message: 'Dashboard user removed' },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => {
      await users.remove(claimsOf(request), request.params.user_id, request.ip)
      return { message: 'Dashboard user removed' }
    },
  )
}
