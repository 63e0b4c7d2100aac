import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Ajv } from 'ajv'
import { Type } from 'typebox'
import { forEachBackend, STANDARD_SEED, TEST_SECRET, type TestApp } from '../../test/helpers/app.js'
import { backends, httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { buildApp } from '../app.js'
import { loadConfig } from './config.js'
import { NUL_ISSUE_TYPE } from './validation.js'

interface Issue {
  loc: (string | number)[]
  msg: string
  type: string
  input?: unknown
  ctx?: Record<string, unknown>
}

function assertValidationShape(body: unknown): Issue[] {
  const detail = (body as { detail: Issue[] }).detail
  assert.ok(Array.isArray(detail) && detail.length > 0, `not an HTTPValidationError: ${JSON.stringify(body)}`)
  for (const d of detail) {
    assert.ok(Array.isArray(d.loc) && ['body', 'path', 'query', 'header'].includes(String(d.loc[0])))
    assert.equal(typeof d.msg, 'string')
    assert.equal(typeof d.type, 'string')
  }
  return detail
}

/** The issue at `loc`, failing when there is none. */
function issueAt(detail: Issue[], ...loc: (string | number)[]): Issue {
  const found = detail.find((d) => JSON.stringify(d.loc) === JSON.stringify(loc))
  assert.ok(found, `no issue at ${JSON.stringify(loc)} in ${JSON.stringify(detail)}`)
  return found
}

forEachBackend(httpBackends, 'request validation and error bodies', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  const login = (payload: string | Buffer | object, headers: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: '/auth/login', payload, headers })

  test('missing fields: type missing, one entry per field, loc under body', async () => {
    const res = await login({})
    assert.equal(res.statusCode, 422)
    const detail = assertValidationShape(res.json())
    assert.equal(issueAt(detail, 'body', 'email').type, 'missing')
    assert.equal(issueAt(detail, 'body', 'password').type, 'missing')
    assert.equal(issueAt(detail, 'body', 'email').msg, 'Field required')
  })

  test('unknown property: extra_forbidden with the offending input', async () => {
    const res = await login({ email: 'a@b.co', password: 'x', admin: true })
    assert.equal(res.statusCode, 422)
    const issue = issueAt(assertValidationShape(res.json()), 'body', 'admin')
    assert.equal(issue.type, 'extra_forbidden')
    assert.equal(issue.input, true)
  })

  test('too long: string_too_long with max_length; echoed input is truncated', async () => {
    const res = await login({ email: 'a@b.co', password: 'p'.repeat(257) })
    assert.equal(res.statusCode, 422)
    const issue = issueAt(assertValidationShape(res.json()), 'body', 'password')
    assert.equal(issue.type, 'string_too_long')
    assert.deepEqual(issue.ctx, { max_length: 256 })
    assert.ok(String(issue.input).length < 257)
  })

  test('wrong types: string_type, int_type, int_parsing', async () => {
    const res = await login({ email: 42, password: 'x', event_id: 1.5 })
    assert.equal(res.statusCode, 422)
    const detail = assertValidationShape(res.json())
    assert.equal(issueAt(detail, 'body', 'email').type, 'string_type')
    assert.equal(issueAt(detail, 'body', 'event_id').type, 'int_type')
    const parsing = await login({ email: 'a@b.co', password: 'x', event_id: '7' })
    assert.equal(parsing.statusCode, 422, 'a numeric string is not coerced in a JSON body')
    assert.equal(issueAt(assertValidationShape(parsing.json()), 'body', 'event_id').type, 'int_parsing')
  })

  test('role outside the allowed values: literal_error', async () => {
    const res = await login({ email: 'a@b.co', password: 'x', role: 'superadmin' })
    assert.equal(res.statusCode, 422)
    const detail = assertValidationShape(res.json())
    assert.equal(detail.length, 1, JSON.stringify(detail))
    assert.equal(issueAt(detail, 'body', 'role').type, 'literal_error')
  })

  test('broken JSON: json_invalid', async () => {
    for (const raw of ['{"email": ', '{"a":1}}', "{'a': 1}", ' ']) {
      const res = await login(raw, { 'content-type': 'application/json' })
      assert.equal(res.statusCode, 422, raw)
      const detail = assertValidationShape(res.json())
      assert.deepEqual(detail[0]?.loc, ['body'])
      assert.equal(detail[0]?.type, 'json_invalid', raw)
    }
  })

  test('bytes that are not UTF-8: json_invalid', async () => {
    const raw = Buffer.concat([
      Buffer.from('{"email": "'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}'),
    ])
    const res = await login(raw, { 'content-type': 'application/json' })
    assert.equal(res.statusCode, 422)
    const detail = assertValidationShape(res.json())
    assert.deepEqual(detail[0]?.loc, ['body'])
    assert.equal(detail[0]?.type, 'json_invalid')
  })

  test('a UTF-8 byte order mark before the JSON is skipped; multi-byte characters are kept', async () => {
    const raw = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('{"email": "ünïcode@example.com", "password": "pässwörd", "role": "admin"}'),
    ])
    const res = await login(raw, { 'content-type': 'application/json' })
    assert.equal(res.statusCode, 401, res.body)
  })

  test('no body at all, or an empty JSON body: the body is reported missing; a JSON non-object is model_type', async () => {
    for (const headers of [{}, { 'content-type': 'application/json' }]) {
      const none = await t.request({ method: 'POST', url: '/auth/login', headers })
      assert.equal(none.statusCode, 422)
      assert.deepEqual(assertValidationShape(none.json()), [
        { loc: ['body'], msg: 'Field required', type: 'missing' },
      ])
    }
    for (const raw of ['null', '[]', '"text"', '12']) {
      const res = await login(raw, { 'content-type': 'application/json' })
      assert.equal(res.statusCode, 422, raw)
      const detail = assertValidationShape(res.json())
      assert.deepEqual(detail[0]?.loc, ['body'])
      assert.equal(detail[0]?.type, 'model_type', raw)
    }
  })

  test('numbers out of the range the service stores: 422, never a 500', async () => {
    const { access_token } = await login(
      Buffer.from(JSON.stringify({ email: 'root@example.com', password: 's3cret-pass' })),
      {
        'content-type': 'application/json',
      },
    ).then((r) => r.json())
    for (const eventId of [-1995402123772197, 2 ** 40]) {
      const device = await t.request({
        method: 'POST',
        url: '/devices/auth',
        payload: { dev_mac: 'AA:BB:CC:DD:EE:FF', event_id: eventId },
      })
      assert.equal(device.statusCode, 422, device.body)
      // An integer the schema lets through but PostgreSQL's column cannot hold (SQLite stores it).
      const key = await t.request({
        method: 'POST',
        url: '/tokens/api-key',
        token: access_token,
        payload: { event_id: eventId, name: 'huge', scopes: ['api:read'] },
      })
      if (t.config.DATABASE_URL?.startsWith('postgres')) {
        assert.equal(key.statusCode, 422, key.body)
        assert.equal(key.json().detail[0].type, 'value_error')
      } else assert.ok([404, 422].includes(key.statusCode), `${key.statusCode} ${key.body}`)
    }
  })

  test('a content type other than JSON: 415 with a detail', async () => {
    for (const type of ['application/xml', 'text/plain', 'application/x-www-form-urlencoded']) {
      const res = await login('email=a&password=b', { 'content-type': type })
      assert.equal(res.statusCode, 415, type)
      assert.equal(typeof res.json().detail, 'string')
    }
  })

  test('a body above BODY_LIMIT_BYTES: 413', async () => {
    const big = JSON.stringify({ email: 'a@b.co', password: 'x'.repeat(t.config.BODY_LIMIT_BYTES) })
    const res = await login(big, { 'content-type': 'application/json' })
    assert.equal(res.statusCode, 413)
    assert.equal(typeof res.json().detail, 'string')
    const small = JSON.stringify({ email: 'a@b.co', password: 'x' })
    assert.equal((await login(small, { 'content-type': 'application/json' })).statusCode, 401)
  })

  test('unknown route and unknown method: 404 {"detail"}', async () => {
    for (const [method, url] of [
      ['GET', '/no/such/route'],
      ['GET', '/auth/login'],
      ['DELETE', '/health'],
    ] as const) {
      const res = await t.request({ method, url })
      assert.equal(res.statusCode, 404, `${method} ${url}`)
      assert.deepEqual(res.json(), { detail: 'Not Found' })
    }
  })

  test('order of checks: 401 before 422 on a protected route', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/auth/logout',
      payload: '{not json',
      headers: { 'content-type': 'application/json' },
    })
    assert.equal(res.statusCode, 401)
    assert.equal(res.headers['www-authenticate'], 'Bearer')
    const extra = await t.request({ method: 'POST', url: '/auth/logout', payload: { nope: 1 } })
    assert.equal(extra.statusCode, 401)
  })

  test('order of checks: 429 before 401 and 422', async () => {
    const headers = { 'x-forwarded-for': '192.0.2.77' }
    const bad = { method: 'POST' as const, url: '/auth/logout', payload: { nope: 1 }, headers }
    for (let i = 0; i < 30; i++) assert.equal((await t.request(bad)).statusCode, 401)
    const res = await t.request(bad)
    assert.equal(res.statusCode, 429)
    assert.equal(res.json().error, 'rate_limit_exceeded')
  })
})

const NUL = 'x\u0000y'

forEachBackend(httpBackends, 'a NUL character (U+0000) in a request string', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
  })

  /** The one issue of a 422 answer, at `loc`, of the NUL type. */
  function refusedAt(
    res: { statusCode: number; body: string; json(): unknown },
    ...loc: (string | number)[]
  ) {
    assert.equal(res.statusCode, 422, res.body)
    const issue = issueAt(assertValidationShape(res.json()), ...loc)
    assert.equal(issue.type, NUL_ISSUE_TYPE, res.body)
    assert.equal(issue.msg, 'String should not contain the NUL character (U+0000)')
    return issue
  }

  test('unauthenticated device, login and reset routes: 422 string_nul_character at the field', async () => {
    const cases: [string, object, string][] = [
      ['/devices/auth', { dev_mac: NUL, event_id: 1 }, 'dev_mac'],
      ['/auth/login/device', { dev_mac: NUL, event_id: 1 }, 'dev_mac'],
      ['/auth/login', { email: NUL, password: 'x' }, 'email'],
      [
        '/devices/operator-token',
        { email: `a${NUL}@b.c`, password: 'x', dev_type: 'POS', dev_mac: 'm' },
        'email',
      ],
      ['/admin/password-reset/email-send', { email: `a${NUL}@b.c` }, 'email'],
    ]
    for (const [url, payload, field] of cases) {
      const issue = refusedAt(await t.request({ method: 'POST', url, payload }), 'body', field)
      assert.equal(typeof issue.input, 'string', url)
      assert.ok(String(issue.input).includes('\u0000'), `${url}: the input is echoed as sent`)
    }
  })

  test('reported with the other problems of the input; a NUL in a key is reported at the key', async () => {
    const res = await t.request({ method: 'POST', url: '/auth/login', payload: { email: NUL, [NUL]: 1 } })
    refusedAt(res, 'body', 'email')
    refusedAt(res, 'body', NUL)
    assert.equal(issueAt(assertValidationShape(res.json()), 'body', 'password').type, 'missing')
    assert.equal(res.json().detail.length, 3, 'the unknown key is not also extra_forbidden')
  })

  test('use-batch with one NUL scan is refused as a whole and records no use', async () => {
    const good = await newTransfer(t, keys.write, ticketUid)
    const other = await newTransfer(t, keys.write, ticketUid)
    const used_at = new Date(t.clock.now()).toISOString()
    const batch = (scans: object[]) =>
      t.request({
        method: 'POST',
        url: '/tickets/use-batch',
        token: deviceToken(t, 1, 1),
        payload: { scans },
      })
    refusedAt(
      await batch([
        { transfer_uid: good.transfer_uid, used_at },
        { transfer_uid: NUL, used_at },
      ]),
      'body',
      'scans',
      1,
      'transfer_uid',
    )
    refusedAt(
      await batch([
        { transfer_uid: good.transfer_uid, used_at },
        { transfer_uid: other.transfer_uid, used_at, access_gate: NUL },
      ]),
      'body',
      'scans',
      1,
      'access_gate',
    )
    const used = await t.db.db
      .selectFrom('transfers')
      .select('used_at')
      .where('uid', 'in', [good.transfer_uid, other.transfer_uid])
      .execute()
    assert.deepEqual(
      used.map((r) => r.used_at),
      [null, null],
    )
    // The same batch without the NUL goes through.
    assert.equal((await batch([{ transfer_uid: good.transfer_uid, used_at }])).statusCode, 200)
  })

  test('partner routes: body, batch and path; nothing is created', async () => {
    const post = (url: string, payload: object | undefined) => partnerPost(t, url, keys.write, payload)
    const transfer = { event_uid: 'summer-fest-2026', email: 'n@example.com', ticket_uid: ticketUid }
    refusedAt(
      await post('/companies/transfer', { ...transfer, company_ticket_id: NUL }),
      'body',
      'company_ticket_id',
    )
    refusedAt(
      await post('/companies/transfer', {
        ...transfer,
        email: `n${NUL}@example.com`,
        company_ticket_id: 'nul-email',
      }),
      'body',
      'email',
    )
    refusedAt(
      await post('/companies/transfer', {
        ...transfer,
        company_ticket_id: 'nul-gate',
        additional_info: { access_gate: NUL },
      }),
      'body',
      'additional_info',
      'access_gate',
    )
    refusedAt(
      await post('/companies/ticket', {
        event_uid: 'summer-fest-2026',
        name: NUL,
        price: 1,
        ticket_date: '2026-07-18T12:00:00.000',
      }),
      'body',
      'name',
    )
    refusedAt(
      await post('/companies/transfers', {
        event_uid: 'summer-fest-2026',
        transfers: [
          { email: 'ok@example.com', ticket_uid: ticketUid, company_ticket_id: 'nul-batch-ok' },
          { email: 'n@example.com', ticket_uid: ticketUid, company_ticket_id: NUL },
        ],
      }),
      'body',
      'transfers',
      1,
      'company_ticket_id',
    )
    refusedAt(await partnerGet(t, '/companies/transfer/%00', keys.write), 'path', 'company_ticket_id')
    refusedAt(await post('/companies/transfer/a%00b/reissue', undefined), 'path', 'company_ticket_id')
    refusedAt(await partnerGet(t, '/companies/tickets?event_uid=%00', keys.write), 'query', 'event_uid')
    for (const id of ['nul-email', 'nul-gate', 'nul-batch-ok'])
      assert.equal((await partnerGet(t, `/companies/transfer/${id}`, keys.write)).statusCode, 404, id)
    const names = await t.db.db.selectFrom('ticket_types').select('name').execute()
    assert.ok(names.every((r) => !r.name.includes('\u0000')))
  })

  test('POST /tokens/verify: a token or key with a NUL is an invalid one (200 valid:false), as its lane answers', async () => {
    for (const payload of [{ token: NUL }, { token: `wb_${NUL}` }, { token: 'x', api_key: `wb_${NUL}` }]) {
      const res = await t.request({ method: 'POST', url: '/tokens/verify', payload })
      assert.equal(res.statusCode, 200, res.body)
      assert.deepEqual(res.json(), { valid: false, claims: null })
    }
  })
})

describe('validation of path and query parameters', () => {
  // No route of the spine takes parameters yet, so a probe route is added to a real instance: the
  // mechanism under test is the app's validator compiler and error handler, not the route.
  let app: Awaited<ReturnType<typeof buildApp>>
  let dispose: () => Promise<void>
  before(async () => {
    const p = await backends[0]!.provision()
    dispose = p.dispose
    app = await buildApp(loadConfig({ JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...p.env }))
    app.get(
      '/probe/:id',
      {
        schema: {
          params: Type.Object({ id: Type.Integer() }),
          querystring: Type.Object(
            { mode: Type.Optional(Type.Union([Type.Literal('a'), Type.Literal('b')])) },
            { additionalProperties: false },
          ),
        },
      },
      async (request) => ({ params: request.params, query: request.query }),
    )
    await app.ready()
  })
  after(async () => {
    await app.close()
    await dispose()
  })

  test('a path parameter that is not an integer: loc starts at path, int_parsing', async () => {
    const res = await app.inject({ method: 'GET', url: '/probe/abc' })
    assert.equal(res.statusCode, 422)
    const issue = issueAt(assertValidationShape(res.json()), 'path', 'id')
    assert.equal(issue.type, 'int_parsing')
    assert.equal(issue.input, 'abc')
    assert.equal((await app.inject({ method: 'GET', url: '/probe/7' })).statusCode, 200)
  })

  test('a NUL in a path or query value: string_nul_character, also where an integer is due', async () => {
    const res = await app.inject({ method: 'GET', url: '/probe/1%00?mode=%00' })
    assert.equal(res.statusCode, 422)
    const detail = assertValidationShape(res.json())
    assert.deepEqual(
      detail.map((d) => [d.loc, d.type, d.input]),
      [[['path', 'id'], NUL_ISSUE_TYPE, '1\u0000']],
      'params are validated first; one issue for the place',
    )
    const query = await app.inject({ method: 'GET', url: '/probe/7?mode=a%00' })
    assert.equal(query.statusCode, 422)
    assert.equal(issueAt(assertValidationShape(query.json()), 'query', 'mode').type, NUL_ISSUE_TYPE)
  })

  test('a bad query value: loc starts at query', async () => {
    const res = await app.inject({ method: 'GET', url: '/probe/7?mode=c' })
    assert.equal(res.statusCode, 422)
    assert.equal(issueAt(assertValidationShape(res.json()), 'query', 'mode').type, 'literal_error')
  })
})

describe('route schemas are compiled at their first use', () => {
  // Fastify asks for every route's validators and serializers before the app is ready; built then,
  // they cost each starting process (every worker of a fleet) more than anything but loading the code.
  test("building the app compiles no schema; a route's first request compiles its own, once", async () => {
    const compiled: unknown[] = []
    const compile = Ajv.prototype.compile
    Ajv.prototype.compile = function (this: Ajv, ...args: Parameters<Ajv['compile']>) {
      compiled.push(args[0])
      return compile.apply(this, args)
    } as Ajv['compile']
    const p = await backends[0]!.provision()
    const app = await buildApp(loadConfig({ JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...p.env }))
    try {
      await app.ready()
      assert.equal(compiled.length, 0, 'no schema compiled before the first request')
      const login = () => app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'a@b.co' } })
      const first = await login()
      assert.equal(first.statusCode, 422)
      assert.equal(issueAt(assertValidationShape(first.json()), 'body', 'password').type, 'missing')
      const once = compiled.length
      assert.ok(once > 0, 'the route compiled its body schema')
      assert.equal((await login()).statusCode, 422)
      assert.equal(compiled.length, once, 'compiled once, not per request')
    } finally {
      Ajv.prototype.compile = compile
      await app.close()
      await p.dispose()
    }
  })
})
