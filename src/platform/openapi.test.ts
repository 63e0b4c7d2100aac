import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { openApiPath, registeredRoutes } from '../../test/helpers/routes.js'

interface Operation {
  summary?: string
  tags?: string[]
  security?: Record<string, unknown>[]
  requestBody?: { content?: Record<string, { schema?: Record<string, unknown> }> }
  responses?: Record<string, unknown>
}
type OpenApi = {
  openapi: string
  info: { version: string }
  paths: Record<string, Record<string, Operation>>
  components: {
    securitySchemes: Record<string, { type: string; flows?: { password?: { tokenUrl: string } } }>
    schemas: Record<string, unknown>
  }
}

// The documentation's own routes are deliberately not part of the document they serve, and the
// dashboard's static files (scripts, styles) are files, not operations.
const DOCS_MACHINERY = (url: string) =>
  url === '/openapi.json' ||
  url === '/docs' ||
  url.startsWith('/docs/') ||
  url.startsWith('/dashboard/assets/')

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

  test('OpenAPI 3.1, version 0.1.0, OAuth2 password flow with token URL /auth/login', () => {
    assert.match(doc.openapi, /^3\.1\./)
    assert.equal(doc.info.version, '0.1.0')
    const schemes = Object.values(doc.components.securitySchemes)
    const oauth = schemes.find((s) => s.type === 'oauth2')
    assert.ok(oauth, 'an oauth2 scheme')
    assert.equal(oauth.flows?.password?.tokenUrl, '/auth/login')
    assert.ok('HTTPValidationError' in doc.components.schemas, 'the 422 shape is named')
  })

  test('every registered route is documented, with its request body schema', () => {
    const routes = registeredRoutes(t.app).filter((r) => !DOCS_MACHINERY(r.url))
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
      if (['POST', 'PUT', 'PATCH'].includes(method)) {
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
})
