// `promtool check metrics` (Prometheus's own linter, Debian's `prometheus` package) on a real scrape,
// after requests that move every kind of metric: names, types, help texts and units as Prometheus
// wants them. Skipped with a loud note where promtool is not installed.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { STANDARD_SEED, startApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'

const METRICS_TOKEN = 'scrape-token-0123456789abcdef'
const installed = spawnSync('promtool', ['--version']).status === 0
if (!installed)
  console.log('!! promtool is not installed (apt-get install prometheus): promtool check SKIPPED')

test('promtool check metrics finds nothing to say about a scrape', {
  skip: installed ? false : 'promtool is not installed',
}, async () => {
  const t = await startApp(backends[0]!, { METRICS_TOKEN })
  try {
    await t.seed(STANDARD_SEED)
    await t.request({
      method: 'POST',
      url: '/auth/login',
      payload: { email: 'root@example.com', password: 's3cret-pass', role: 'admin' },
    })
    await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: 'not-a-token' } })
    await t.request({ method: 'GET', url: '/ready' })
    const scrape = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
    assert.equal(scrape.statusCode, 200)
    assert.match(scrape.body, /^wristband_build_info\{version="[^"]+",node_version="v\d+/m)
    const run = spawnSync('promtool', ['check', 'metrics'], { input: scrape.body, encoding: 'utf8' })
    assert.equal(`${run.stdout}${run.stderr}`.trim(), '', 'promtool has remarks')
    assert.equal(run.status, 0)
  } finally {
    await t.close()
  }
})
