import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { openApiPath, registeredRoutes } from '../../test/helpers/routes.js'
import { SENT_ERROR_CODES } from './errors.js'
import { mergeFeatureOpenApi } from './openapi.js'

/** Tags whose operations must carry request (when they take a body) and response examples. */
const TAGS_WITH_EXAMPLES = ['partner', 'webhooks', 'holder', 'auth', 'passkeys']

interface Media {
  schema?: { $ref?: string }
  example?: unknown
  examples?: Record<string, { value: unknown }>
}
interface Operation {
  operationId?: string
  summary?: string
  tags?: string[]
  security?: Record<string, unknown>[]
  requestBody?: { content?: Record<string, { schema?: Record<string, unknown>; example?: unknown }> }
  responses?: Record<string, { description: string; content?: Record<string, Media> }>
}
type OpenApi = {
  openapi: string
  tags: { name: string; description?: string }[]
  info: { version: string; 'x-release'?: string }
  paths: Record<string, Record<string, Operation>>
  components: {
    securitySchemes: Record<string, { type: string; flows?: { password?: { tokenUrl: string } } }>
    schemas: Record<string, unknown>
  }
}

// The documentation's own routes are deliberately not part of the document they serve, and the
// dashboard's static files (scripts, styles) and the scanner page's (src/scanner-page) are files, not
// operations.
const DOCS_MACHINERY = (url: string) =>
  url === '/openapi.json' ||
  url === '/docs' ||
  url.startsWith('/docs/') ||
  url.startsWith('/dashboard/assets/') ||
  url === '/scanner' ||
  url.startsWith('/scanner/')

// GET /tokens/check stands for the other methods and the paths under it that gateways ask with
// (`/tokens/check/*`, which the route tree prints as `/tokens/check*`); its description says they
// answer the same (docs/gateways.md).
const GATEWAY_FORMS = (r: { method: string; url: string }) =>
  /^\/tokens\/check\/?\*$/.test(r.url) || (r.url === '/tokens/check' && r.method !== 'GET')

forEachBackend(httpBackends.slice(0, 1), 'OpenAPI document and /docs', (ctx) => {
  let t: TestApp
  let doc: OpenApi
  before(async () => {
    t = ctx()
    const res = await t.request({ method: 'GET', url: '/openapi.json' })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^application\/json/)
    doc = res.json()
  })

  test('OpenAPI 3.1, the interface version 0.1.0, OAuth2 password flow with token URL /auth/login', () => {
    assert.match(doc.openapi, /^3\.1\./)
    // The interface's version, as the specification gives it; the release is info.x-release
    // (src/ops/versions.test.ts).
    assert.equal(doc.info.version, '0.1.0')
    const schemes = Object.values(doc.components.securitySchemes)
    const oauth = schemes.find((s) => s.type === 'oauth2')
    assert.ok(oauth, 'an oauth2 scheme')
    assert.equal(oauth.flows?.password?.tokenUrl, '/auth/login')
    assert.ok('HTTPValidationError' in doc.components.schemas, 'the 422 shape is named')
  })

  test('every registered route is documented, with its request body schema', () => {
    const routes = registeredRoutes(t.app).filter((r) => !DOCS_MACHINERY(r.url) && !GATEWAY_FORMS(r))
    const seen = routes.map((r) => `${r.method} ${r.url}`)
    for (const r of ['POST /auth/login', 'POST /tokens/verify', 'GET /admin/me', 'GET /health'])
      assert.ok(seen.includes(r), `route tree read back: ${seen.join(', ')}`)
    for (const { method, url } of routes) {
      const op = doc.paths[openApiPath(url)]?.[method.toLowerCase()]
      assert.ok(op, `${method} ${url} is missing from /openapi.json`)
      assert.ok(op.summary && op.tags?.length, `${method} ${url} has a summary and tags`)
      assert.ok(
        // 303: a browser form answered with the page to go to next (the dashboard's sign-in and sign-out).
        op.responses?.['200'] ??
          op.responses?.['201'] ??
          op.responses?.['202'] ??
          op.responses?.['204'] ??
          op.responses?.['303'],
        `${method} ${url} success`,
      )
      // The OAuth endpoints ignore unknown parameters and answer a malformed request 400
      // invalid_request, as RFC 6749 section 3.2 and 5.2 require (src/oauth2/oauth2.test.ts).
      if (['POST', 'PUT', 'PATCH'].includes(method) && !url.startsWith('/oauth2/')) {
        const schema = op.requestBody?.content?.['application/json']?.schema
        if (!schema) continue // a body-less action (e.g. MFA setup)
        assert.equal(
          schema.additionalProperties,
          false,
          `${method} ${url}: unknown properties must be rejected`,
        )
        assert.ok(op.responses?.['422'], `${method} ${url} documents 422`)
      }
    }
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.keys(ops).map((m) => `${m} ${p}`),
    )
    const served = new Set(routes.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.url)}`))
    for (const d of documented) assert.ok(served.has(d), `${d} is documented but not served`)
  })

  test('routes that need a credential declare their scheme, and exactly they answer 401 without one', async () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const url = path.replace(/\{[^}]+\}/g, '1')
        const res = await t.request({
          method: method.toUpperCase() as 'GET',
          url,
          ...(op.requestBody ? { payload: {} } : {}),
        })
        // Bearer routes (OAuth2 scheme), partner routes (api_key header) and the dashboard's JSON (session
        // cookie) all declare their credential.
        const bearer = (op.security ?? []).some(
          (s) => 'OAuth2PasswordBearer' in s || 'APIKeyHeader' in s || 'DashboardSession' in s,
        )
        if (bearer) assert.equal(res.statusCode, 401, `${method} ${path} without a credential`)
        else assert.notEqual(res.statusCode, 401, `${method} ${path} answers 401 but declares no security`)
      }
    }
  })

  test('/docs is served by the service itself: no external URL, every asset answers 200', async () => {
    const res = await t.request({ method: 'GET', url: '/docs' })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^text\/html/)
    const html = res.body
    assert.ok(!/(src|href)\s*=\s*["']?(https?:)?\/\//i.test(html), 'no asset from another host')
    const assets = [...html.matchAll(/(?:src|href)\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!)
    assert.ok(assets.length >= 3, `assets: ${assets.join(', ')}`)
    for (const asset of assets) {
      const url = new URL(asset, 'http://service/docs/').pathname
      const a = await t.request({ method: 'GET', url })
      assert.equal(a.statusCode, 200, url)
    }
    // The UI fetches its document relative to itself (./json), i.e. from this service.
    const init = await t.request({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
    assert.equal(init.statusCode, 200)
    assert.match(init.body, /url: resolveUrl\('\.\/json'\)/)
    const served = await t.request({ method: 'GET', url: '/docs/json' })
    assert.deepEqual(served.json().paths, doc.paths)
  })

  const operations = () =>
    Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
    )

  // The rule for every route, present and future: an operationId (in the route's schema, with its
  // success description in the schema's `doc`), unique
  // across the document, a summary, tags, and no response left as "Default Response".
  test('every operation has a unique operationId, a summary, tags and real response descriptions', () => {
    const ids = new Map<string, string>()
    for (const { key, op } of operations()) {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z0-9]+$/, `${key} has a camelCase operationId`)
      assert.ok(!ids.has(op.operationId!), `${key} reuses the operationId of ${ids.get(op.operationId!)}`)
      ids.set(op.operationId!, key)
      assert.ok(op.summary && op.tags?.length, `${key} has a summary and tags`)
      for (const [status, res] of Object.entries(op.responses ?? {}))
        assert.ok(
          res.description && res.description !== 'Default Response',
          `${key} ${status} says what it answers (its schema's \`doc\` gives the success description)`,
        )
    }
    const tags = new Set(doc.tags.map((t) => t.name))
    for (const { key, op } of operations())
      for (const t of op.tags ?? []) assert.ok(tags.has(t), `${key}: tag ${t} is listed`)
  })

  // Partner, webhook, holder and auth operations are the ones integrators code against: each shows an
  // example request (when it takes a JSON body) and an example success answer (when it answers JSON).
  test(`operations tagged ${TAGS_WITH_EXAMPLES.join(', ')} carry request and response examples`, () => {
    let checked = 0
    for (const { key, op } of operations()) {
      if (!op.tags?.some((t) => TAGS_WITH_EXAMPLES.includes(t))) continue
      checked++
      const body = op.requestBody?.content?.['application/json']
      if (body) assert.notEqual(body.example, undefined, `${key} has a request example`)
      const ok = Object.entries(op.responses ?? {}).find(([s]) => s.startsWith('2'))
      assert.ok(ok, `${key} has a success response`)
      const json = ok[1].content?.['application/json']
      if (json) assert.notEqual(json.example, undefined, `${key} has a response example`)
    }
    assert.ok(checked >= 14, `${checked} operations checked`)
  })

  test('every JSON error status says its body and lists its `error` codes, each with an example', () => {
    for (const { key, op } of operations()) {
      for (const [status, res] of Object.entries(op.responses ?? {})) {
        if (Number(status) < 400) continue
        const json = res.content?.['application/json']
        if (!json?.schema?.$ref?.match(/ErrorBody|RateLimited|HTTPValidationError/)) continue
        assert.ok(json.example !== undefined || json.examples, `${key} ${status} has an example body`)
        if (json.schema.$ref.endsWith('ErrorBody')) assert.match(res.description, /Body: `\{"detail"/)
        // The codes the route's texts give (its schema's `doc`), each shown by an example of its own.
        const codes = status === '429' ? ['rate_limit_exceeded'] : Object.keys(json.examples ?? {})
        for (const code of codes) {
          assert.ok(res.description.includes(`\`${code}\``), `${key} ${status} names ${code}`)
          assert.ok(json.examples?.[code], `${key} ${status} shows an example of ${code}`)
        }
      }
    }
    // The codes the code throws (grep `error: '` in src) are all listed somewhere.
    const described = JSON.stringify(doc.paths)
    for (const code of [
      'duplicate_company_ticket_id',
      'idempotency_key_in_use',
      'already_claimed',
      'webhook_disabled',
      'already_used',
      'username_taken',
      'rate_limit_exceeded',
    ])
      assert.ok(described.includes(code), `${code} is documented`)
  })

  // One list (ERROR_CODES in errors.ts): the document names no code outside it, and every code it sends is
  // documented, on ErrorBody and at an operation that answers it.
  test('the `error` codes the document lists are exactly the sent codes of ERROR_CODES', () => {
    const listed = new Set<string>()
    for (const { op } of operations())
      for (const res of Object.values(op.responses ?? {}))
        for (const code of Object.keys(res.content?.['application/json']?.examples ?? {})) listed.add(code)
    const sent = SENT_ERROR_CODES.map((c) => c.code)
    assert.deepEqual([...listed].sort(), [...sent].sort())
    // Open to new codes: listed as an extensible enum, never a closed `enum` that a strict
    // generated client would reject a new code with.
    const body = doc.components.schemas.ErrorBody as {
      properties: { error: { enum?: string[]; 'x-extensible-enum': string[] } }
    }
    assert.equal(body.properties.error.enum, undefined)
    assert.deepEqual(
      [...body.properties.error['x-extensible-enum']].sort(),
      SENT_ERROR_CODES.filter((c) => c.field === 'error')
        .map((c) => c.code)
        .sort(),
    )
  })

  test('/docs is titled and marked for wristband, not for the framework', async () => {
    const page = await t.request({ method: 'GET', url: '/docs' })
    assert.match(page.body, /<title>wristband API reference<\/title>/)
    assert.doesNotMatch(page.body, /Swagger UI<\/title>|favicon-32x32\.png/)
    const init = await t.request({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
    const logo = /img\.src = 'data:image\/svg\+xml;base64,([^']+)'/.exec(init.body)
    assert.ok(logo, 'the top bar logo is replaced')
    const svg = Buffer.from(logo[1]!, 'base64').toString()
    assert.match(svg, />wristband</)
    assert.doesNotMatch(svg.toLowerCase(), /fastify|swagger/)
  })

  test('the use notification is described as an OpenAPI 3.1 webhook, and deliveries carry its typed payload', () => {
    const hooks = (
      doc as unknown as {
        webhooks: Record<
          string,
          { post: Operation & { parameters: { in: string; name: string; required: boolean }[] } }
        >
      }
    ).webhooks
    const used = hooks.ticketUsed!.post
    assert.equal(used.operationId, 'ticketUsed')
    assert.deepEqual(
      used.parameters.map((p) => [p.in, p.name, p.required]),
      [
        ['header', 'webhook-id', true],
        ['header', 'webhook-timestamp', true],
        ['header', 'webhook-signature', true],
      ],
    )
    assert.match(
      String((used as { description?: string }).description),
      /HMAC-SHA256 over `<webhook-id>\.<webhook-timestamp>\.<raw body>`/,
    )
    const payload = used.requestBody!.content!['application/json']!.schema as {
      properties: Record<string, unknown>
      required: string[]
    }
    for (const f of [
      'event_uid',
      'transfer_uid',
      'user_email',
      'company_ticket_id',
      'status',
      'used_timestamp',
    ])
      assert.ok(payload.required.includes(f), f)
    assert.ok(payload.properties.used_at && payload.properties.event_timezone)
    // The deliveries' payload is the same schema, not an untyped object.
    const list = doc.paths['/companies/webhook/deliveries']!.get!.responses!['200']!.content![
      'application/json'
    ]!.schema as unknown as {
      properties: { deliveries: { items: { properties: { payload: typeof payload } } } }
    }
    const shown = list.properties.deliveries.items.properties.payload
    assert.deepEqual(shown.required, payload.required)
    assert.deepEqual(Object.keys(shown.properties), Object.keys(payload.properties))
  })
})

// Each feature keeps its own texts (src/<feature>/<feature>.openapi.ts): two that describe the same
// tag or parameter would leave one of them silently unused, so the merge refuses it.
test('a tag or parameter example given by two features is refused', () => {
  assert.throws(
    () => mergeFeatureOpenApi([{ tags: { a: 'A' } }, { tags: { a: 'B' } }]),
    /tags "a" is given by two/,
  )
  assert.throws(() => mergeFeatureOpenApi([{ params: { id: '1' } }, { params: { id: '2' } }]), /params "id"/)
})
