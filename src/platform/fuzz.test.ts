import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import fc from 'fast-check'
import { sql } from 'kysely'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { createApiKey } from '../api-keys/api-keys.store.js'

/**
 * Property test over every operation of /openapi.json, so routes added later are covered without
 * touching this file: whatever the body, content type, headers and parameters, the answer is never a
 * 5xx, its status is one the operation documents (or a generic client error), and a 4xx stores nothing.
 * Then a NUL (U+0000) in a string of the body, a path or a query parameter: always a 4xx, on both
 * backends (PostgreSQL refuses NUL in text, SQLite would store it).
 */

const RUNS_PER_OPERATION = 40
const NUL_RUNS_PER_OPERATION = 12
// Answers any route may give without listing them: auth, routing, size, media type, validation, limits.
const GENERIC = new Set([400, 401, 404, 405, 413, 415, 422, 429])

interface JsonSchema {
  type?: string | string[]
  properties?: Record<string, JsonSchema>
  items?: JsonSchema
  anyOf?: JsonSchema[]
  enum?: unknown[]
  const?: unknown
  minLength?: number
  maxLength?: number
  minimum?: number
  maximum?: number
}
interface Operation {
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> }
  responses?: Record<string, unknown>
  parameters?: { in: string; name: string; schema?: JsonSchema }[]
}

const hugeString = fc.integer({ min: 300, max: 80_000 }).map((n) => 'x'.repeat(n))
const wild: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.string({ unit: 'binary' }),
  hugeString,
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
)

/** A string holding U+0000 (NUL), which PostgreSQL refuses in text and every route answers 422. */
const nulString = fc
  .tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }))
  .map(([a, b]) => `${a}\u0000${b}`)

/**
 * Values shaped like the schema most of the time, and anything at all the rest of the time; with
 * `nul`, every string the schema asks for holds a NUL.
 */
function valueFor(schema: JsonSchema | undefined, depth = 0, nul = false): fc.Arbitrary<unknown> {
  if (!schema || depth > 4) return wild
  let fitted: fc.Arbitrary<unknown>
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  if (schema.enum) fitted = fc.constantFrom(...schema.enum)
  else if (schema.const !== undefined) fitted = fc.constant(schema.const)
  else if (schema.anyOf) fitted = fc.oneof(...schema.anyOf.map((s) => valueFor(s, depth + 1, nul)))
  else if (type === 'string')
    fitted = nul
      ? nulString
      : fc.string({ minLength: schema.minLength ?? 0, maxLength: schema.maxLength ?? 40 })
  else if (type === 'integer')
    fitted = fc.integer({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6 })
  else if (type === 'number') fitted = fc.double({ noNaN: true })
  else if (type === 'boolean') fitted = fc.boolean()
  else if (type === 'array') fitted = fc.array(valueFor(schema.items, depth + 1, nul), { maxLength: 5 })
  else if (type === 'object' || schema.properties) {
    const props = Object.entries(schema.properties ?? {})
    const keys = props.map(([k]) => k)
    fitted = fc
      .tuple(
        fc.record(Object.fromEntries(props.map(([k, s]) => [k, valueFor(s, depth + 1, nul)]))),
        fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, fc.subarray(keys)),
        fc.oneof(
          { weight: 3, arbitrary: fc.constant({}) },
          fc.dictionary(fc.string({ maxLength: 12 }), wild, { maxKeys: 2 }),
        ),
      )
      .map(([known, dropped, extra]) => {
        const out: Record<string, unknown> = { ...extra, ...known }
        for (const k of dropped) delete out[k]
        return out
      })
  } else fitted = wild
  return fc.oneof({ weight: depth === 0 ? 4 : 12, arbitrary: fitted }, { weight: 1, arbitrary: wild })
}

function deeplyNested(): fc.Arbitrary<string> {
  return fc
    .tuple(fc.integer({ min: 50, max: 20_000 }), fc.boolean())
    .map(([n, arrays]) =>
      arrays ? `${'['.repeat(n)}${']'.repeat(n)}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`,
    )
}

/** A request body as bytes on the wire, and the content type it claims. */
function bodyFor(schema: JsonSchema | undefined) {
  const payload = fc.oneof(
    { weight: 6, arbitrary: valueFor(schema).map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 1, arbitrary: deeplyNested() },
    { weight: 1, arbitrary: fc.string() }, // mostly not JSON
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) }, // often not UTF-8
  )
  const contentType = fc.oneof(
    { weight: 12, arbitrary: fc.constant('application/json') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-8',
        'application/json; charset=latin1',
        'text/plain',
        'application/xml',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=xyz',
        'application/vnd.api+json',
        'application/octet-stream',
        '*/*',
      ),
    },
    { weight: 1, arbitrary: fc.stringMatching(/^[ -~]{0,40}$/) },
  )
  return fc.option(fc.tuple(payload, contentType), { freq: 8 })
}

// Headers the transport itself owns; random values there test the HTTP library, not the service.
const RESERVED = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'expect',
])
const headerName = fc.stringMatching(/^[a-z][a-z0-9-]{0,24}$/).filter((h) => !RESERVED.has(h))
const headerValue = fc.stringMatching(/^[ -~]{0,80}$/)
const randomHeaders = fc.dictionary(headerName, headerValue, { maxKeys: 4 })
const address = fc.oneof(fc.ipV4(), fc.ipV6(), headerValue, fc.constant('1.2.3.4, 5.6.7.8'))
const pathValue = fc.oneof(
  fc.integer().map(String),
  fc.string({ maxLength: 300 }),
  hugeString,
  fc.constant('..'),
)
const query = fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 40 }), { maxKeys: 3 })

async function rowCounts(t: TestApp): Promise<Record<string, number>> {
  const { db, dialect } = t.db
  // Our own schema only: an introspection of the whole database trips over other runs' schemas.
  const listed =
    dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)
      : await sql<{ name: string }>`
          select table_name as name from information_schema.tables
          where table_schema = ${t.config.DATABASE_SCHEMA}`.execute(db)
  const tables = listed.rows
    .map((r) => r.name)
    // The audit log records attempts, failed ones included (failed logins, rate-limit hits): by design
    // a 4xx may add to it.
    .filter((name) => !name.startsWith('kysely_') && !name.startsWith('sqlite_') && name !== 'audit_log')
  assert.ok(tables.length >= 5, `tables: ${tables.join(', ')}`)
  const union = tables
    .map((name) => `select '${name}' as t, count(*) as n from "${name}"`)
    .join(' union all ')
  const rows = (await sql.raw<{ t: string; n: number | string }>(union).execute(db)).rows
  return Object.fromEntries(rows.map((r) => [r.t, Number(r.n)]))
}

forEachBackend(httpBackends, 'fuzz: every documented operation', (ctx) => {
  let t: TestApp
  let operations: [string, string, Operation][]
  let bearer: fc.Arbitrary<string | undefined>
  let tokens: string[]
  let partnerKey: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json()
    operations = Object.entries(doc.paths as Record<string, Record<string, Operation>>).flatMap(
      ([path, ops]) =>
        Object.entries(ops).map(
          ([method, op]) => [path, method.toUpperCase(), op] as [string, string, Operation],
        ),
    )
    const admin = await login(t, 'root@example.com')
    const operator = await login(t, 'op@example.com', 'operator')
    tokens = [admin.access_token, operator.access_token]
    partnerKey = (
      await createApiKey(t.db.db, {
        event_id: 1,
        name: 'fuzz',
        scopes: ['api:read', 'api:write'],
        created_by: null,
        now: t.clock.now(),
        partner: 'Fuzz',
      })
    ).plaintext
    // Real tokens now and then, so validation and permission checks behind authentication are reached.
    bearer = fc.oneof(
      {
        weight: 2,
        arbitrary: fc.constantFrom(`Bearer ${admin.access_token}`, `Bearer ${operator.access_token}`),
      },
      fc.constant(undefined),
      fc.constantFrom(
        `Bearer ${admin.refresh_token}`,
        'Bearer',
        'Basic Zm9vOmJhcg==',
        `Bearer ${admin.access_token.slice(0, -3)}abc`,
      ),
      headerValue,
    )
  })

  test('no 5xx, only documented statuses, and a 4xx stores nothing', async (s) => {
    assert.ok(operations.length >= 6, `operations: ${operations.map((o) => o[0]).join(', ')}`)
    for (const [path, method, op] of operations) {
      const schema = op.requestBody?.content?.['application/json']?.schema
      const documented = new Set(Object.keys(op.responses ?? {}).map(Number))
      await s.test(`${method} ${path}`, async () => {
        const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)
        await fc.assert(
          fc.asyncProperty(
            bodyFor(schema),
            fc.tuple(...params.map(() => pathValue)),
            query,
            randomHeaders,
            bearer,
            fc.option(address),
            async (body, values, q, headers, authorization, xff) => {
              let url = path
              params.forEach((p, i) => {
                url = url.replace(`{${p}}`, encodeURIComponent(String(values[i])))
              })
              const qs = new URLSearchParams(q).toString()
              const before = await rowCounts(t)
              const res = await t.request({
                method: method as 'GET',
                url: qs ? `${url}?${qs}` : url,
                headers: {
                  ...headers,
                  ...(xff !== null ? { 'x-forwarded-for': xff } : {}),
                  ...(authorization ? { authorization } : {}),
                  ...(body ? { 'content-type': body[1] } : {}),
                },
                ...(body ? { payload: body[0] } : {}),
              })
              const status = res.statusCode
              assert.ok(status < 500, `${method} ${url} answered ${status}: ${res.body.slice(0, 300)}`)
              assert.ok(
                documented.has(status) || GENERIC.has(status),
                `${method} ${url} answered undocumented ${status}: ${res.body.slice(0, 300)}`,
              )
              if (status >= 400) {
                // The dashboard's pages answer errors with an HTML page; every other operation with JSON.
                if (!String(res.headers['content-type']).startsWith('text/html')) {
                  const parsed = JSON.parse(res.body)
                  assert.ok('detail' in parsed, `error body without detail: ${res.body.slice(0, 300)}`)
                  if (status === 422) assert.ok(Array.isArray(parsed.detail))
                }
                assert.deepEqual(
                  await rowCounts(t),
                  before,
                  `${method} ${url} answered ${status} but stored something`,
                )
              }
            },
          ),
          { numRuns: RUNS_PER_OPERATION },
        )
      })
    }
  })
  test('a NUL (U+0000) in a string of the body, a path or a query parameter: 4xx, stores nothing', async (s) => {
    // A dashboard account and session of this test's own: the test before may have ended partner1's
    // sessions (a fuzzed PATCH or DELETE of the account with the admin's token is a valid request there,
    // and answers 2xx). Nothing here can end this one: every request must be refused and store nothing.
    await t.seed({ dashboard_users: [{ username: 'nul-fuzz', password: 's3cret-pass', event_ids: [1] }] })
    const dashboardCookie = await dashboardSession(t, 'nul-fuzz')
    for (const [path, method, op] of operations) {
      const schema = op.requestBody?.content?.['application/json']?.schema
      const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)
      const queryNames = (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name)
      // Where a NUL can be put: the path, the query the operation documents (others are ignored, as any
      // undocumented query parameter is), a body with a string in its schema. Not the body of POST
      // /tokens/verify: a token with a NUL is an invalid token there (200 valid:false, validation.test.ts);
      // nor of POST /oauth2/revoke, which answers 200 for any token it never issued (RFC 7009).
      const tokenBodies = ['/tokens/verify', '/oauth2/revoke']
      const places = [
        ...(params.length > 0 ? ['path'] : []),
        ...(queryNames.length > 0 ? ['query'] : []),
        ...(schema && JSON.stringify(schema).includes('"string"') && !tokenBodies.includes(path)
          ? ['body']
          : []),
      ]
      if (places.length === 0) continue
      await s.test(`${method} ${path}`, async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom(...places),
            valueFor(schema, 0, true),
            valueFor(schema),
            fc.tuple(...params.map(() => fc.tuple(nulString, pathValue))),
            fc.dictionary(fc.constantFrom(...queryNames, 'x'), nulString, { minKeys: 1, maxKeys: 3 }),
            fc.option(fc.constantFrom(...tokens), { freq: 6 }),
            async (place, nulBody, body, values, q, token) => {
              const payload = JSON.stringify(place === 'body' ? nulBody : body) ?? 'null'
              // Optional properties dropped, a value of another type: the body may hold no string.
              if (place === 'body') fc.pre(payload.includes('\\u0000'))
              let url = path
              params.forEach((p, i) => {
                const [withNul, plain] = values[i]!
                url = url.replace(`{${p}}`, encodeURIComponent(place === 'path' ? withNul : plain))
              })
              if (place === 'query') url = `${url}?${new URLSearchParams(q)}`
              const before = await rowCounts(t)
              const res = await t.request({
                method: method as 'GET',
                url,
                headers: {
                  'content-type': 'application/json',
                  api_key: partnerKey,
                  ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
                },
                // Signed in everywhere, so the NUL meets validation rather than the sign-in redirect.
                cookies: { wb_session: dashboardCookie },
                payload,
              })
              const status = res.statusCode
              assert.ok(
                status >= 400 && status < 500,
                `${method} ${url} ${payload.slice(0, 200)} answered ${status}: ${res.body.slice(0, 300)}`,
              )
              assert.deepEqual(
                await rowCounts(t),
                before,
                `${method} ${url} answered ${status} but stored something`,
              )
            },
          ),
          { numRuns: NUL_RUNS_PER_OPERATION },
        )
      })
    }
  })
})
