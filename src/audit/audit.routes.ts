import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import { ForbiddenError, ValidationFailed } from '../platform/errors.js'
import { createHttpClient } from '../platform/http-client.js'
import type { JobRunner } from '../platform/jobs/jobs.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { isSuperadmin } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { AuditService, type AuditServiceDeps, CURSOR_PATTERN, parseCursor } from './audit.service.js'
import { startAuditSink } from './audit-sink.js'

export const AuditQuery = Type.Object({
  kind: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  actor: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  outcome: Type.Optional(
    Type.Union([Type.Literal('success'), Type.Literal('failure'), Type.Literal('denied')]),
  ),
  before: Type.Optional(Type.Integer({ minimum: 1, description: 'next_before of the previous page' })),
  after: Type.Optional(
    Type.String({
      pattern: CURSOR_PATTERN,
      description:
        'Page forwards, oldest first, from this cursor: `0-0` for the start of the log, then the `next_after` of ' +
        'the previous page (or the `cursor` of the last entry you kept). Not with `before`.',
    }),
  ),
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
  cursor: Type.Optional(
    Type.String({ description: 'Forward pages only: pass as `after` to resume after this entry' }),
  ),
})

export const AuditPage = Type.Object({
  items: Type.Array(AuditEntry),
  next_before: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Pass as `before` for the next (older) page; null on the last page and on forward pages',
  }),
  next_after: Type.Union([Type.String(), Type.Null()], {
    description:
      'Forward pages (`after`): pass as `after` for the next page, also when this one is empty (ask again ' +
      'later for entries written since); null on backward pages',
  }),
})

export interface AuditRoutesDeps extends AuditServiceDeps {
  tokens: TokenService
  jobs: JobRunner
  clock: Clock
  config: Pick<Config, 'AUDIT_SINK_URL' | 'AUDIT_SINK_AUTHORIZATION' | 'AUDIT_SINK_POLL_MS'>
}

export const auditRoutes: FastifyPluginAsyncTypebox<AuditRoutesDeps> = async (app, deps) => {
  const { tokens, config } = deps
  const entries = new AuditService(deps)
  if (config.AUDIT_SINK_URL !== undefined) {
    // The operator's own collector, often on a private address: not held to the webhooks' public-only rule.
    const http = createHttpClient({ allowPrivate: true, timeoutMs: 30_000 })
    app.addHook('onClose', () => http.close())
    await startAuditSink(deps.jobs, {
      db: deps.db,
      dialect: deps.database.dialect,
      clock: deps.clock,
      log: app.log,
      http,
      url: config.AUDIT_SINK_URL,
      authorization: config.AUDIT_SINK_AUTHORIZATION,
      pollMs: config.AUDIT_SINK_POLL_MS,
    })
  }
  app.get(
    '/admin/audit',
    {
      config: perMinute(60),
      ...protect(tokens, { roles: ['admin'] }),
      schema: {
        tags: ['audit'],
        summary: 'Security events, newest first, or forwards from a cursor (superadmins only)',
        description:
          'Logins, refresh-token reuse, MFA, password resets, API keys, offline tokens and rate-limit hits, ' +
          'with time, actor (`<role>:<id>` or the address tried), client address and outcome. Filter by ' +
          '`kind`, `actor` and `outcome`; page backwards with `before`. A reader that follows the log (a SIEM) ' +
          'pages forwards with `after`: in the order the records were committed, each record exactly once, ' +
          'even while others are being written (a record whose transaction is still open waits, with those ' +
          'after it, until it ends).',
        security: [{ OAuth2PasswordBearer: [] }],
        querystring: AuditQuery,
        response: { 200: AuditPage, ...errorResponses(401, 403) },
        doc: {
          operationId: 'listAuditEvents',
          returns: 'A page of security events',
          response: {
            items: [
              {
                id: 918,
                at: '2026-07-18T20:14:03.000Z',
                kind: 'api_key_created',
                actor: 'admin:1',
                ip: '203.0.113.7',
                outcome: 'success',
                detail: {
                  key_id: 5,
                  event_id: 1,
                  name: 'Acme box office 2026',
                  scopes: ['api:read', 'api:write'],
                  partner: 'Acme Tickets',
                },
              },
              {
                id: 917,
                at: '2026-07-18T20:12:41.000Z',
                kind: 'login',
                actor: 'admin:1',
                ip: '203.0.113.7',
                outcome: 'success',
                detail: null,
              },
            ],
            next_before: 917,
            next_after: null,
          },
        },
      },
    },
    async (request) => {
      if (!isSuperadmin(claimsOf(request))) throw new ForbiddenError()
      const { limit, after, ...filters } = request.query
      if (after === undefined) return entries.page(filters, limit)
      const cursor = parseCursor(after)
      if (filters.before !== undefined || cursor === undefined)
        throw new ValidationFailed([
          {
            loc: ['query', 'after'],
            msg: cursor ? 'after and before exclude each other' : 'not a cursor',
            type: 'value_error',
          },
        ])
      const { before: _, ...rest } = filters
      return entries.pageAfter(cursor, rest, limit)
    },
  )
}
