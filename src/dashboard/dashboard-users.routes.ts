import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { AuditLog } from '../audit/audit.store.js'
import { missingEvents } from '../events/events.store.js'
import { parseEventIds } from '../identities/grants.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import { ConflictError, ForbiddenError, NotFoundError } from '../platform/errors.js'
import { hashPassword } from '../platform/passwords.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { isSuperadmin } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import {
  type DashboardUserRecord,
  deleteDashboardUser,
  findDashboardUser,
  insertDashboardUser,
  listDashboardUsers,
  updateDashboardUser,
} from './dashboard-users.store.js'
import { deleteSessionsOf } from './sessions.store.js'

export interface DashboardUsersDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
}

const Username = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._@+-]+$' })
// The seed file's password rule.
const Password = Type.String({ minLength: 8, maxLength: 128 })
const EventIds = Type.Array(Type.Integer({ minimum: 1 }), { maxItems: 1000, uniqueItems: true })

const DashboardUser = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  event_ids: Type.Array(Type.Integer()),
  created_at: Type.String({ format: 'date-time' }),
})

const IdParams = Type.Object({ user_id: Type.Integer({ minimum: 1 }) })

function view(r: DashboardUserRecord) {
  return {
    id: r.id,
    username: r.username,
    event_ids: parseEventIds(r.event_ids),
    created_at: new Date(r.created_at).toISOString(),
  }
}

/**
 * Dashboard accounts for partners, managed by superadmins (the seed file creates them too). Changing
 * a password or removing an account ends its open dashboard sessions.
 */
export const dashboardUsersRoutes: FastifyPluginAsyncTypebox<DashboardUsersDeps> = async (app, deps) => {
  const guard = protect(deps.tokens, { roles: ['admin'] })
  const common = { tags: ['dashboard'], security: [{ OAuth2PasswordBearer: [] }] }

  /** The account as stored now decides, not the token: these routes create and change passwords. */
  async function superadminOnly(request: Parameters<typeof claimsOf>[0]) {
    const claims = claimsOf(request)
    if (!isSuperadmin(await storedGrant(deps.db, claims)))
      throw new ForbiddenError('Only a superadmin manages dashboard users')
    return claims
  }

  async function assertEventsExist(ids: number[]) {
    const missing = await missingEvents(deps.db, ids)
    if (missing.length > 0) throw new NotFoundError(`Unknown event ids: ${missing.join(', ')}`)
  }

  app.get(
    '/admin/dashboard-users',
    {
      config: perMinute(60),
      ...guard,
      schema: {
        ...common,
        summary: 'List dashboard users (superadmin)',
        response: { 200: Type.Array(DashboardUser), ...errorResponses(401, 403) },
      },
    },
    async (request) => {
      await superadminOnly(request)
      return (await listDashboardUsers(deps.db)).map(view)
    },
  )

  app.post(
    '/admin/dashboard-users',
    {
      config: perMinute(30),
      ...guard,
      schema: {
        ...common,
        summary: 'Create a dashboard user (superadmin)',
        body: Type.Object(
          { username: Username, password: Password, event_ids: EventIds },
          { additionalProperties: false },
        ),
        response: { 201: DashboardUser, ...errorResponses(401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const claims = await superadminOnly(request)
      const { username, password, event_ids } = request.body
      await assertEventsExist(event_ids)
      let created: DashboardUserRecord
      try {
        created = await insertDashboardUser(deps.db, {
          username,
          password_hash: await hashPassword(password),
          event_ids: event_ids.join(','),
          created_at: deps.clock.now(),
        })
      } catch (err) {
        if (isUniqueViolation(err)) throw new ConflictError('Username already taken', 'username_taken')
        throw err
      }
      await deps.audit.record({
        kind: 'dashboard_user_created',
        actor: `admin:${claims.sub}`,
        ip: request.ip,
        outcome: 'success',
        detail: { dashboard_user_id: created.id, event_ids },
      })
      return reply.code(201).send(view(created))
    },
  )

  app.patch(
    '/admin/dashboard-users/:user_id',
    {
      config: perMinute(30),
      ...guard,
      schema: {
        ...common,
        summary: 'Change the events or the password of a dashboard user (superadmin)',
        params: IdParams,
        body: Type.Object(
          { password: Type.Optional(Password), event_ids: Type.Optional(EventIds) },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: DashboardUser, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = await superadminOnly(request)
      const { user_id } = request.params
      const { password, event_ids } = request.body
      if (!(await findDashboardUser(deps.db, user_id))) throw new NotFoundError('Dashboard user not found')
      if (event_ids) await assertEventsExist(event_ids)
      await updateDashboardUser(deps.db, user_id, {
        ...(password ? { password_hash: await hashPassword(password) } : {}),
        ...(event_ids ? { event_ids: event_ids.join(',') } : {}),
      })
      if (password) await deleteSessionsOf(deps.db, 'dashboard_user', user_id)
      await deps.audit.record({
        kind: 'dashboard_user_updated',
        actor: `admin:${claims.sub}`,
        ip: request.ip,
        outcome: 'success',
        detail: { dashboard_user_id: user_id, password_changed: Boolean(password), event_ids },
      })
      return view((await findDashboardUser(deps.db, user_id))!)
    },
  )

  app.delete(
    '/admin/dashboard-users/:user_id',
    {
      config: perMinute(30),
      ...guard,
      schema: {
        ...common,
        summary: 'Remove a dashboard user and end their sessions (superadmin)',
        params: IdParams,
        response: { 200: Message, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = await superadminOnly(request)
      const { user_id } = request.params
      if (!(await findDashboardUser(deps.db, user_id))) throw new NotFoundError('Dashboard user not found')
      await deps.db.transaction().execute(async (tx) => {
        await deleteSessionsOf(tx, 'dashboard_user', user_id)
        await deleteDashboardUser(tx, user_id)
      })
      await deps.audit.record({
        kind: 'dashboard_user_deleted',
        actor: `admin:${claims.sub}`,
        ip: request.ip,
        outcome: 'success',
        detail: { dashboard_user_id: user_id },
      })
      return { message: 'Dashboard user removed' }
    },
  )
}
