import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/** Every path of the consumer, identity-provider and device features, with what its document must show. */
const PATHS: { method: string; path: string; body: string[]; ok: string[]; bearer?: boolean }[] = [
  {
    method: 'post',
    path: '/auth/login/customer',
    body: ['phone', 'password'],
    ok: ['access_token', 'refresh_token'],
  },
  { method: 'post', path: '/auth/login/phone', body: ['phone'], ok: ['message'] },
  { method: 'post', path: '/auth/login/phone/verify', body: ['phone', 'code'], ok: ['access_token'] },
  { method: 'post', path: '/auth/login/idp', body: ['id_token'], ok: ['access_token'] },
  { method: 'post', path: '/verify/messaging/start', body: ['phone'], ok: ['status'] },
  {
    method: 'post',
    path: '/verify/messaging/check',
    body: ['phone', 'code'],
    ok: ['status', 'verification_token'],
  },
  {
    method: 'post',
    path: '/auth/register',
    body: ['phone', 'password', 'verification_token', 'email', 'first_name', 'last_name'],
    ok: ['access_token'],
  },
  { method: 'get', path: '/consumers/me', body: [], ok: ['id', 'phone', 'email'], bearer: true },
  {
    method: 'patch',
    path: '/consumers/me',
    body: ['email', 'first_name', 'last_name'],
    ok: ['id'],
    bearer: true,
  },
  {
    method: 'post',
    path: '/devices/auth',
    body: ['dev_mac', 'event_id', 'device_key'],
    ok: ['id', 'event_id'],
  },
  {
    method: 'post',
    path: '/auth/login/device',
    body: ['dev_mac', 'event_id', 'device_key'],
    ok: ['offline_token', 'expires_at'],
  },
  {
    method: 'post',
    path: '/devices/{device_id}/token',
    body: ['operator_id'],
    ok: ['token', 'token_type'],
    bearer: true,
  },
  {
    method: 'post',
    path: '/devices/operator-token',
    body: ['email', 'password', 'dev_type', 'dev_mac'],
    ok: ['user_id', 'event_id', 'email', 'token', 'mode', 'dev_type'],
  },
]

interface Schema {
  properties: Record<string, unknown>
  additionalProperties?: boolean
}
interface Operation {
  summary?: string
  tags?: string[]
  security?: unknown
  requestBody: { content: { 'application/json': { schema: Schema } } }
  responses: Record<string, { content: { 'application/json': { schema: Schema } } }>
}

forEachBackend(httpBackends, 'OpenAPI document: consumer and device paths', (ctx) => {
  let doc: { paths: Record<string, Record<string, Operation>> }
  before(async () => {
    const t: TestApp = ctx()
    doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json()
  })

  for (const p of PATHS) {
    test(`${p.method.toUpperCase()} ${p.path} is documented with its shapes`, () => {
      const op = doc.paths[p.path]?.[p.method]
      assert.ok(op, 'path missing')
      assert.ok(op.summary)
      assert.ok(op.tags?.length)
      if (p.body.length) {
        const schema = op.requestBody.content['application/json'].schema
        assert.deepEqual(Object.keys(schema.properties).sort(), [...p.body].sort())
        assert.equal(schema.additionalProperties, false)
      }
      const ok = op.responses['200']!.content['application/json'].schema
      for (const field of p.ok) assert.ok(field in ok.properties, `200 lacks ${field}`)
      assert.ok(op.responses['422'], '422 documented')
      assert.ok(op.responses['429'], '429 documented')
      if (p.bearer) {
        assert.deepEqual(op.security, [{ OAuth2PasswordBearer: [] }])
        assert.ok(op.responses['401'])
      }
    })
  }

  test('the dev_type values are listed', () => {
    const schema = doc.paths['/devices/operator-token']!.post!.requestBody.content['application/json'].schema
    const text = JSON.stringify(schema.properties.dev_type)
    for (const t of ['POS', 'REPORT', 'FASTPASS', 'KIDS', 'DISPATCH']) assert.ok(text.includes(`"${t}"`), t)
  })
})
