import assert from 'node:assert/strict'
import fs from 'node:fs'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { metricValue } from '../../test/helpers/scrape.js'

/**
 * Two versions, told apart: the interface's (the OpenAPI document's `info.version`, 0.1.0 as the
 * specification says) and the release's (package.json's, 0.3.0 today), which `GET /`,
 * `wristband_build_info` and the document's `info.x-release` tell (and `wristband --version`:
 * src/cli/startup.test.ts). The document once said the release in `info.version`.
 */
const RELEASE: string = JSON.parse(
  fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version

forEachBackend(httpBackends.slice(0, 1), 'the interface version and the release', (ctx) => {
  let t: TestApp
  before(() => {
    t = ctx()
  })

  test('the release is not the interface version here, so the tests below tell them apart', () => {
    assert.notEqual(RELEASE, '0.1.0')
  })

  test('/openapi.json: info.version is the interface version 0.1.0, info.x-release the release', async () => {
    const res = await t.request({ method: 'GET', url: '/openapi.json' })
    assert.equal(res.statusCode, 200)
    const { info } = res.json()
    assert.equal(info.version, '0.1.0')
    assert.equal(info['x-release'], RELEASE)
  })

  test('GET / tells the release', async () => {
    const res = await t.request({ method: 'GET', url: '/' })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().version, RELEASE)
  })

  test('wristband_build_info tells the release', async () => {
    assert.equal(await metricValue(t, 'wristband_build_info', { version: RELEASE }), 1)
    assert.equal(await metricValue(t, 'wristband_build_info', { version: '0.1.0' }), 0)
  })
})
