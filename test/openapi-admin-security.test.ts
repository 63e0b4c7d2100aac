import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startApp, type TestApp } from './helpers/app.js'
import { httpBackends } from './helpers/backends.js'

// The document is walked by path; its shape is what the assertions check, so it is typed loosely.
// biome-ignore lint/suspicious/noExplicitAny: an arbitrary JSON document
type Json = Record<string, any>

/** What the OpenAPI document must say about each administrator-security path. */
const PATHS: {
  method: string
  path: string
  bearer: boolean
  body?: Record<string, Json>
  query?: string[]
  params?: string[]
  ok: string[]
  errors: string[]
}[] = [
  {
    method: 'post',
    path: '/admin/mfa/setup',
    bearer: true,
    ok: ['secret', 'qr_uri'],
    errors: ['401', '403', '429'],
  },
  {
    method: 'post',
    path: '/admin/mfa/verify',
    bearer: true,
    body: { code: { type: 'string', minLength: 6, maxLength: 6 } },
    ok: ['access_token', 'refresh_token', 'token_type', 'expires_in'],
    errors: ['400', '401', '403', '422', '429'],
  },
  {
    method: 'get',
    path: '/admin/sensitive/ping',
    bearer: true,
    ok: ['status'],
    errors: ['401', '403', '429'],
  },
  {
    method: 'post',
    path: '/admin/password-reset/email-send',
    bearer: false,
    body: {
      email: { type: 'string', minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' },
    },
    ok: ['message'],
    errors: ['422', '429'],
  },
  {
    method: 'post',
    path: '/admin/password-reset/{token}',
    bearer: false,
    params: ['token'],
    body: { new_password: { type: 'string', minLength: 8, maxLength: 128 } },
    ok: ['message'],
    errors: ['410', '422', '429'],
  },
  {
    method: 'post',
    path: '/tokens/api-key',
    bearer: true,
    body: { event_id: { type: 'integer' }, name: { type: 'string', minLength: 1, maxLength: 100 } },
    ok: ['id', 'api_key', 'name', 'event_id', 'created_at'],
    errors: ['401', '403', '404', '422', '429'],
  },
  {
    method: 'delete',
    path: '/tokens/api-key/{key_id}',
    bearer: true,
    params: ['key_id'],
    ok: ['message'],
    errors: ['401', '403', '404', '422', '429'],
  },
  {
    method: 'get',
    path: '/tokens/api-keys',
    bearer: true,
    query: ['event_id'],
    ok: [],
    errors: ['401', '403', '404', '422', '429'],
  },
  {
    method: 'post',
    path: '/tokens/offline',
    bearer: true,
    body: { event_id: { type: 'integer' } },
    ok: ['offline_token', 'expires_at', 'event_id'],
    errors: ['401', '403', '404', '422', '429'],
  },
  {
    method: 'get',
    path: '/admin/audit',
    bearer: true,
    query: ['kind', 'actor', 'outcome', 'before', 'limit'],
    ok: ['items', 'next_before'],
    errors: ['401', '403', '422', '429'],
  },
]

describe('OpenAPI document: administrator security paths', () => {
  let t: TestApp
  let doc: Json
  before(async () => {
    t = await startApp(httpBackends[0]!)
    const res = await t.request({ method: 'GET', url: '/openapi.json' })
    assert.equal(res.statusCode, 200)
    doc = res.json()
  })
  after(async () => t.close())

  for (const p of PATHS) {
    test(`${p.method.toUpperCase()} ${p.path}`, () => {
      const op = doc.paths[p.path]?.[p.method]
      assert.ok(op, 'path missing')
      assert.ok(op.summary, 'no summary')
      assert.ok(op.tags?.length, 'no tags')
      assert.equal(Boolean(op.security?.some((s: Json) => 'OAuth2PasswordBearer' in s)), p.bearer, 'security')
      if (p.body) {
        const schema = op.requestBody?.content?.['application/json']?.schema
        assert.ok(schema, 'no request body')
        assert.equal(schema.additionalProperties, false, 'body accepts unknown properties')
        for (const [name, shape] of Object.entries(p.body)) {
          assert.ok(schema.required.includes(name), `${name} not required`)
          for (const [k, v] of Object.entries(shape))
            assert.equal(schema.properties[name][k], v, `${name}.${k}`)
        }
      }
      const params = (op.parameters ?? []) as Json[]
      for (const name of p.params ?? [])
        assert.ok(
          params.some((x) => x.in === 'path' && x.name === name),
          `path parameter ${name}`,
        )
      for (const name of p.query ?? [])
        assert.ok(
          params.some((x) => x.in === 'query' && x.name === name),
          `query parameter ${name}`,
        )
      const ok = op.responses['200']?.content?.['application/json']?.schema
      assert.ok(ok, 'no 200 schema')
      for (const field of p.ok) assert.ok(field in ok.properties, `200 lacks ${field}`)
      for (const status of p.errors) assert.ok(op.responses[status], `no ${status} response`)
    })
  }

  test('GET /tokens/api-keys lists items without the key itself', () => {
    const ok = doc.paths['/tokens/api-keys'].get.responses['200'].content['application/json'].schema
    assert.equal(ok.type, 'array')
    const fields = Object.keys(ok.items.properties)
    for (const f of ['prefix', 'name', 'scopes', 'created_at', 'last_used_at'])
      assert.ok(fields.includes(f), f)
    assert.ok(!fields.includes('api_key'))
  })
})
