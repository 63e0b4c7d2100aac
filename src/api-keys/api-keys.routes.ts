import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { AuditLog } from '../audit/audit.store.js'
import { eventExists } from '../events/events.store.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, NotFoundError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { API_KEY_REVOCATION_MS, apiKeyJti } from './api-key.credential.js'
import { type ApiKeyRecord, createApiKey, getApiKey, listApiKeys, revokeApiKey } from './api-keys.store.js'

const ApiScope = Type.Union([Type.Literal('api:read'), Type.Literal('api:write')])

export const APIKeyRequest = Type.Object(
  {
    event_id: Type.Integer(),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    scopes: Type.Array(ApiScope, { minItems: 1, uniqueItems: true }),
  },
  { additionalProperties: false },
)

export const APIKeyResponse = Type.Object({
  id: Type.Integer({ description: 'The key_id that DELETE /tokens/api-key/{key_id} takes' }),
  api_key: Type.String({ description: 'wb_… plaintext, shown only in this answer' }),
  name: Type.String(),
  event_id: Type.Integer(),
  scopes: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
})

export const APIKeyListItem = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String({ description: 'First characters of the key, to tell keys apart' }),
  event_id: Type.Integer(),
  scopes: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

export interface ApiKeyRoutesDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
}

/** Managing an event's API keys is part of managing the event. */
const MANAGE = 'events:manage'

function requireEventAccess(claims: Pick<Claims, 'permissions'>, eventId: number): void {
  if (!hasScope(claims, eventId, MANAGE)) throw new ForbiddenError()
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const listItem = (k: ApiKeyRecord) => ({
  id: k.id,
  name: k.name,
  prefix: k.key_prefix,
  event_id: k.event_id,
  scopes: k.scopes,
  created_at: new Date(k.created_at).toISOString(),
  last_used_at: iso(k.last_used_at),
  revoked_at: iso(k.revoked_at),
})

export const apiKeyRoutes: FastifyPluginAsyncTypebox<ApiKeyRoutesDeps> = async (app, deps) => {
  const { db, clock, audit } = deps
  const adminOnly = protect(deps.tokens, { roles: ['admin'] })

  async function requireEvent(eventId: number): Promise<void> {
    if (!(await eventExists(db, eventId))) throw new NotFoundError('Event not found')
  }

  app.post(
    '/tokens/api-key',
    {
      config: perMinute(10),
      ...adminOnly,
      schema: {
        tags: ['api-keys'],
        summary: 'Create an API key for an event (role event_client); the plaintext is shown once',
        description:
          'For administrators of the event. `scopes` is a non-empty subset of api:read, api:write. Only the ' +
          "key's SHA-256 is stored; the `wb_…` plaintext exists only in this answer.",
        security: [{ OAuth2PasswordBearer: [] }],
        body: APIKeyRequest,
        response: { 200: APIKeyResponse, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const { event_id, name, scopes } = request.body
      // The key never expires: the account and its grant as stored now decide, not the token's claims.
      requireEventAccess(await storedGrant(db, claims), event_id)
      await requireEvent(event_id)
      const actor = `admin:${claims.sub}`
      const { record, plaintext } = await createApiKey(db, {
        event_id,
        name,
        scopes,
        created_by: actor,
        now: clock.now(),
      })
      await audit.record({
        kind: 'api_key_created',
        actor,
        ip: request.ip,
        outcome: 'success',
        detail: { key_id: record.id, event_id, name, scopes },
      })
      return {
        id: record.id,
        api_key: plaintext,
        name: record.name,
        event_id: record.event_id,
        scopes: record.scopes,
        created_at: new Date(record.created_at).toISOString(),
      }
    },
  )

  app.delete(
    '/tokens/api-key/:key_id',
    {
      config: perMinute(30),
      ...adminOnly,
      schema: {
        tags: ['api-keys'],
        summary: 'Revoke an API key; POST /tokens/verify calls it invalid at once',
        description: 'Revoking a key that is already revoked answers 200 again.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: Type.Object({ key_id: Type.Integer() }),
        response: { 200: Message, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const key = await getApiKey(db, request.params.key_id)
      if (!key) throw new NotFoundError('API key not found')
      requireEventAccess(claims, key.event_id)
      if (await revokeApiKey(db, key.id, clock.now())) {
        await deps.tokens.revokeCredential(apiKeyJti(key.id), API_KEY_REVOCATION_MS)
        await audit.record({
          kind: 'api_key_revoked',
          actor: `admin:${claims.sub}`,
          ip: request.ip,
          outcome: 'success',
          detail: { key_id: key.id, event_id: key.event_id },
        })
      }
      return { message: 'API key revoked' }
    },
  )

  app.get(
    '/tokens/api-keys',
    {
      config: perMinute(30),
      ...adminOnly,
      schema: {
        tags: ['api-keys'],
        summary: "An event's API keys, revoked ones included, without secrets",
        security: [{ OAuth2PasswordBearer: [] }],
        querystring: Type.Object({ event_id: Type.Integer() }),
        response: { 200: Type.Array(APIKeyListItem), ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { event_id } = request.query
      requireEventAccess(claimsOf(request), event_id)
      await requireEvent(event_id)
      return (await listApiKeys(db, event_id)).map(listItem)
    },
  )
}
