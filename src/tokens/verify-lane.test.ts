import assert from 'node:assert/strict'
import { once } from 'node:events'
import net from 'node:net'
import { after, before, test } from 'node:test'
import { login, logout, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { comparable, lanePair, portOf, type Sent, send } from '../../test/helpers/lane.js'
import { until } from '../../test/helpers/until.js'
import { createApiKey } from '../api-keys/api-keys.store.js'

eachBackend(httpBackends, 'POST /tokens/verify: the fast lane answers as Fastify does', (backend) => {
  let on: TestApp
  let portOn: number
  let portOff: number
  const started = lanePair(backend)
  before(async () => {
    ;({ on, portOn, portOff } = started())
    await on.seed(STANDARD_SEED)
  })

  test('the same requests get the same status, headers and body with VERIFY_FAST_LANE on and off', async () => {
    const pair = await login(on, 'ev1@example.com')
    const gone = await login(on, 'ev1@example.com')
    const out = await logout(on, gone.access_token, gone.refresh_token)
    assert.equal(out.statusCode, 200)
    const key = await createApiKey(on.db.db, {
      event_id: 1,
      name: 'parity',
      scopes: ['api:read'],
      created_by: null,
      now: Date.now(),
    })
    const credential = await createApiKey(on.db.db, {
      event_id: 1,
      name: 'verify credential',
      scopes: ['tokens:verify'],
      created_by: null,
      now: Date.now(),
    })
    const refusedByBoth = async () => {
      const token = JSON.stringify({ token: gone.refresh_token })
      const a = await send(portOn, { name: 'x', body: token })
      const b = await send(portOff, { name: 'x', body: token })
      return JSON.parse(a.body).valid === false && JSON.parse(b.body).valid === false
    }
    await until('both instances know the revocation', refusedByBoth)

    const tampered = `${pair.access_token.slice(0, -2)}${pair.access_token.endsWith('A') ? 'B' : 'A'}A`
    const tok = (token: unknown) => JSON.stringify({ token })
    const requests: Sent[] = [
      { name: 'valid access token', body: tok(pair.access_token) },
      {
        name: 'valid, with a request id',
        body: tok(pair.access_token),
        headers: { 'x-request-id': 'abc-123' },
      },
      { name: 'bad request id', body: tok(pair.access_token), headers: { 'x-request-id': 'a b' } },
      { name: 'valid refresh token', body: tok(pair.refresh_token) },
      { name: 'revoked refresh token', body: tok(gone.refresh_token) },
      { name: 'tampered signature', body: tok(tampered) },
      { name: 'not a token', body: tok('not-a-token') },
      { name: 'API key', body: tok(key.plaintext) },
      { name: 'unknown API key', body: tok('wb_unknown') },
      // A NUL is refused as input everywhere else (422); here it makes a token that is simply not valid.
      { name: 'NUL in the token', body: tok('x\u0000y') },
      { name: 'NUL in an API key', body: tok('wb_\u0000') },
      { name: 'NUL in the credential', body: JSON.stringify({ token: 'x', api_key: 'wb_\u0000' }) },
      {
        name: 'with a verify credential',
        body: JSON.stringify({ token: pair.access_token, api_key: credential.plaintext }),
      },
      {
        name: 'with the credential first',
        body: JSON.stringify({ api_key: credential.plaintext, token: pair.access_token }),
      },
      {
        name: 'with a key that is no verify credential',
        body: JSON.stringify({ token: pair.access_token, api_key: key.plaintext }),
      },
      { name: 'with a made-up credential', body: JSON.stringify({ token: 'x', api_key: 'wb_madeup' }) },
      { name: 'with an empty credential', body: JSON.stringify({ token: 'x', api_key: '' }) },
      { name: 'with a credential not a string', body: JSON.stringify({ token: 'x', api_key: 5 }) },
      { name: 'with a credential too long', body: JSON.stringify({ token: 'x', api_key: 'k'.repeat(257) }) },
      {
        name: 'with a credential and more',
        body: JSON.stringify({ token: 'x', api_key: credential.plaintext, more: 1 }),
      },
      {
        name: 'charset in the type',
        body: tok(pair.access_token),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      },
      {
        name: 'type in capitals',
        body: tok(pair.access_token),
        headers: { 'content-type': 'Application/JSON' },
      },
      { name: 'spaces in the body', body: `{ "token" : ${JSON.stringify(pair.access_token)} }` },
      { name: 'malformed JSON', body: '{"token":' },
      { name: 'empty object', body: '{}' },
      { name: 'token not a string', body: tok(5) },
      { name: 'extra property', body: JSON.stringify({ token: pair.access_token, more: 1 }) },
      { name: 'proto key', body: `{"token":"x","__proto__":{"a":1}}` },
      { name: 'duplicate key', body: `{"token":"x","token":${JSON.stringify(pair.access_token)}}` },
      { name: 'array', body: '[]' },
      {
        name: 'byte order mark',
        body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(tok('x'))]),
      },
      { name: 'not UTF-8', body: Buffer.from([0x7b, 0x22, 0x74, 0xff, 0x22, 0x7d]) },
      { name: 'token too long', body: tok('a'.repeat(8193)) },
      { name: 'oversized body', body: tok('a'.repeat(70_000)) },
      {
        name: 'wrong content type',
        body: tok(pair.access_token),
        headers: { 'content-type': 'text/plain' },
      },
      { name: 'no content type', body: tok(pair.access_token), headers: { 'content-type': '' } },
      { name: 'GET', method: 'GET', body: '' },
    ]
    for (const req of requests) {
      const address = `192.0.2.${requests.indexOf(req) + 1}`
      const headers = { 'x-forwarded-for': address, ...req.headers }
      const a = await send(portOn, { ...req, headers })
      const b = await send(portOff, { ...req, headers })
      assert.deepEqual(comparable(a, req), comparable(b, req), req.name)
    }

    // The lane did answer: its answers carry the same headers in an order of their own.
    const fresh = { 'x-forwarded-for': '198.18.1.1' }
    const a = await send(portOn, { name: 'valid', body: tok(pair.access_token), headers: fresh })
    const b = await send(portOff, { name: 'valid', body: tok(pair.access_token), headers: fresh })
    assert.equal(a.headers['x-ratelimit-remaining'], '599')
    assert.notDeepEqual(
      a.rawHeaders.filter((_, i) => i % 2 === 0),
      b.rawHeaders.filter((_, i) => i % 2 === 0),
    )
  })

  test('the lane counts a client under the address Fastify gives it', async () => {
    await assertSameAddresses(on, portOn, 'default TRUST_PROXY')
  })

  test('an upload cut off mid-body is dropped; the service goes on answering', async () => {
    const socket = net.connect(portOn, '127.0.0.1')
    await once(socket, 'connect')
    socket.write(
      'POST /tokens/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\n\r\n{"token":"ab',
    )
    // TCP delivers the partial body before the close: the lane is waiting for the rest of it when
    // the client goes away (node:http then destroys the request, an 'error' nobody listens to).
    socket.destroy()
    await once(socket, 'close')
    const after = await send(portOn, { name: 'after', body: JSON.stringify({ token: 'x' }) })
    assert.equal(after.status, 200)
    assert.equal(after.body, '{"valid":false,"claims":null}')
  })

  test('rate-limited: the 601st request of a minute from one address is the same 429 on both', async () => {
    const pair = await login(on, 'ev1@example.com')
    const req: Sent = {
      name: 'limited',
      body: JSON.stringify({ token: pair.access_token }),
      headers: { 'x-forwarded-for': '198.18.0.1' },
    }
    for (let i = 0; i < 600; i++) {
      const [a, b] = await Promise.all([send(portOn, req), send(portOff, req)])
      assert.deepEqual(comparable(a, req), comparable(b, req), `request ${i + 1}`)
      assert.equal(a.status, 200)
    }
    for (let i = 0; i < 2; i++) {
      const [a, b] = await Promise.all([send(portOn, req), send(portOff, req)])
      assert.equal(a.status, 429)
      assert.deepEqual(comparable(a, req), comparable(b, req))
    }
  })
})

/**
 * The lane and the route count a request under the same address: a request answered by the lane and
 * the same one sent to Fastify (a spelling of the content type the lane leaves to it) share one
 * counter, for each form of X-Forwarded-For.
 */
async function assertSameAddresses(t: TestApp, port: number, form: string) {
  const pair = await login(t, 'ev1@example.com')
  const body = JSON.stringify({ token: pair.access_token })
  const toRoute = { 'content-type': 'application/json; charset=UTF-8' }
  // A plain address (the lane's shortcut) and what proxy-addr works out (a chain, spacing, an
  // address to ignore).
  const forwarded = [
    '203.0.113.5',
    '2001:db8::9',
    '198.51.100.7, 203.0.113.6',
    ' 203.0.113.8 ',
    'not-an-ip',
    '',
  ]
  for (const value of forwarded) {
    const what = `TRUST_PROXY ${form}, X-Forwarded-For: ${JSON.stringify(value)}`
    const headers: Record<string, string> = value === '' ? {} : { 'x-forwarded-for': value }
    const byLane = await send(port, { name: value, body, headers })
    const byRoute = await send(port, { name: value, body, headers: { ...headers, ...toRoute } })
    assert.equal(byLane.status, 200, what)
    assert.equal(byRoute.status, 200, what)
    assert.notEqual(byLane.headers['x-ratelimit-remaining'], undefined, what)
    assert.equal(
      Number(byRoute.headers['x-ratelimit-remaining']),
      Number(byLane.headers['x-ratelimit-remaining']) - 1,
      what,
    )
  }
}

eachBackend(httpBackends, 'POST /tokens/verify: lane and route agree on each TRUST_PROXY form', (backend) => {
  let p: ProvisionedBackend
  before(async () => {
    p = await backend.provision()
  })
  after(async () => {
    await p?.dispose()
  })
  // Every peer, none, hop counts, the peer itself listed, a list that leaves the peer out.
  for (const form of ['true', 'false', '1', '2', '127.0.0.1', '10.0.0.0/8, 192.168.0.0/16']) {
    test(`TRUST_PROXY=${form}`, async () => {
      const prefix = p.env.REDIS_PREFIX ?? 'wb:'
      const t = await startApp(backend, { TRUST_PROXY: form, REDIS_PREFIX: `${prefix}${form}:` }, p)
      try {
        if (form === 'true') await t.seed(STANDARD_SEED)
        await t.app.listen({ host: '127.0.0.1', port: 0 })
        await assertSameAddresses(t, portOf(t), form)
      } finally {
        await t.close()
      }
    })
  }
})

eachBackend(httpBackends, 'POST /tokens/verify: lane and route agree on other limits', (backend) => {
  let portOn: number
  let portOff: number
  // A route with other limits than VERIFY_LIMITS: the lane takes its limits from the route's.
  const verifyLimits = { maxToken: 40, maxApiKey: 48, anonymousPerMinute: 600 }
  const started = lanePair(backend, { verifyLimits })
  before(() => {
    ;({ portOn, portOff } = started())
  })

  test('a token or key at the limit, and one past it, get the same answers from both', async () => {
    const requests: Sent[] = []
    for (const [what, token] of [
      ['at maxLength', 't'.repeat(40)],
      ['past maxLength', 't'.repeat(41)],
      ['at maxLength, two-byte characters', 'é'.repeat(40)],
      ['past maxLength, two-byte characters', 'é'.repeat(41)],
      ['at maxLength, escaped', '\\'.repeat(20)],
    ] as const)
      requests.push({ name: `token ${what}`, body: JSON.stringify({ token }) })
    for (const [what, apiKey] of [
      ['at its limit', `wb_${'k'.repeat(45)}`],
      ['past its limit', `wb_${'k'.repeat(46)}`],
    ] as const)
      requests.push({ name: `key ${what}`, body: JSON.stringify({ token: 'x', api_key: apiKey }) })
    for (const req of requests) {
      const headers = { 'x-forwarded-for': `192.0.2.${requests.indexOf(req) + 1}` }
      const a = await send(portOn, { ...req, headers })
      const b = await send(portOff, { ...req, headers })
      assert.deepEqual(comparable(a, req), comparable(b, req), req.name)
      assert.equal(a.status, req.name.includes('past') ? 422 : 200, req.name)
    }
  })
})
