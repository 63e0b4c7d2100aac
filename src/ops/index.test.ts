import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

forEachBackend(httpBackends.slice(0, 1), 'GET / and the /docs page over HTTP', (ctx) => {
  let t: TestApp
  before(() => {
    t = ctx()
  })

  test('GET / links the documentation, the dashboard and the probes, and each link answers', async () => {
    const res = await t.request({ method: 'GET', url: '/' })
    assert.equal(res.statusCode, 200)
    const { service, links } = res.json()
    assert.equal(service, 'wristband')
    assert.deepEqual(Object.keys(links).sort(), ['dashboard', 'docs', 'health', 'live', 'openapi', 'ready'])
    for (const url of Object.values(links) as string[]) {
      const linked = await t.request({ method: 'GET', url })
      assert.ok([200, 302, 303].includes(linked.statusCode), `${url}: ${linked.statusCode}`)
    }
  })

  test('/docs over plain HTTP has no upgrade-insecure-requests (the page would stay blank)', async () => {
    for (const url of ['/docs', '/docs/', '/docs/static/index.html']) {
      const res = await t.request({ method: 'GET', url, headers: { host: 'wristband.internal:8000' } })
      const csp = String(res.headers['content-security-policy'])
      assert.doesNotMatch(csp, /upgrade-insecure-requests/, url)
      // The page's own policy, not the API's `default-src 'none'`, which would block its scripts.
      assert.match(csp, /script-src 'self'/, url)
    }
  })

  test('/docs over HTTPS (X-Forwarded-Proto from the proxy) keeps upgrade-insecure-requests', async () => {
    const res = await t.request({ method: 'GET', url: '/docs/', headers: { 'x-forwarded-proto': 'https' } })
    assert.match(String(res.headers['content-security-policy']), /upgrade-insecure-requests/)
    const api = await t.request({ method: 'GET', url: '/health', headers: { 'x-forwarded-proto': 'https' } })
    assert.match(String(api.headers['content-security-policy']), /default-src 'none'/)
  })
})
