import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startApp, TEST_SECRET } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import { buildApp } from '../app.js'
import { loadConfig } from './config.js'

/**
 * Route schemas are compiled at their route's first use, not while the app gets ready (the time every
 * starting worker saved: validation.ts), so a schema Ajv or fast-json-stringify cannot compile would no
 * longer stop the start: it would answer 500 at its route's first request. This suite is the check
 * that took the start's place: it compiles every schema every route registered, request and response.
 */
eachBackend(backends, 'every route schema compiles', (backend) => {
  test("every route's request validators and response serializers compile", async () => {
    const t = await startApp(backend)
    try {
      const { compiled, failures } = t.app.putOffSchemas.compileAll()
      assert.deepEqual(failures, [])
      // Each route's parts and responses are listed, and the partner batch's transfers, not a few.
      for (const where of [
        'POST /auth/login body',
        'GET /events/:event_id/scan-sync querystring',
        'GET /events/:event_id/scan-sync params',
        'POST /companies/transfers body',
        'POST /companies/transfers (each transfer) body',
        'POST /auth/login response 200',
      ])
        assert.ok(compiled.includes(where), `${where} in ${compiled.length} compilations`)
      assert.ok(compiled.length > 500, `${compiled.length} compilations`)
    } finally {
      await t.close()
    }
  })
})

test("the check names the route and part of a schema that does not compile, which would fail its route's requests instead", async () => {
  const p = await backends[0]!.provision()
  const app = await buildApp(loadConfig({ JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...p.env }))
  try {
    app.post(
      '/broken',
      {
        schema: {
          querystring: { type: 'object', properties: { q: { type: 'string', pattern: '(' } } },
          body: { type: 'object', properties: { a: { type: 'string', pattern: '[' } } },
          response: { 200: { $ref: '#/definitions/nothing' } },
        },
      },
      async () => ({}),
    )
    app.get(
      '/broken-answer',
      { schema: { response: { 200: { $ref: '#/definitions/nothing' } } } },
      async () => ({}),
    )
    await app.ready()
    const { failures } = app.putOffSchemas.compileAll()
    assert.deepEqual(failures.map((f) => f.where).sort(), [
      'GET /broken-answer response 200',
      'HEAD /broken-answer response 200',
      'POST /broken body',
      'POST /broken querystring',
      'POST /broken response 200',
    ])
    for (const f of failures) assert.ok(f.error.length > 0, f.where)
    // What the check stands in for: the route's first request compiles it, and fails: a validator's
    // failure is taken for the request's (a well-formed body answered 422 json_invalid), a serializer's
    // is a 500.
    const sent = await app.inject({ method: 'POST', url: '/broken', payload: { a: 'x' } })
    assert.equal(sent.statusCode, 422)
    assert.equal(sent.json().detail[0].type, 'json_invalid')
    assert.equal((await app.inject({ method: 'GET', url: '/broken-answer' })).statusCode, 500)
  } finally {
    await app.close()
    await p.dispose()
  }
})
