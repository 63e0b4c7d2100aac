import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'

/**
 * Third audit (docs/security.md), F4 (Info): "the dashboard's passkey form answers 500 to a body without
 * its fields". Every dashboard form is validated by its schema: a body without its fields, with fields
 * of the wrong kind or with fields it does not take is 400, and the page names the field; never a 500.
 */
const FORMS = [
  '/dashboard/passkeys',
  '/dashboard/passkeys/1/delete',
  '/dashboard/login',
  '/dashboard/login/code',
  '/dashboard/login/passkey',
  '/dashboard/logout',
  '/dashboard/events/1/webhooks/deliveries/1/resend',
  '/dashboard/events/1/devices/1/revoke',
]

forEachBackend(httpBackends, 'F4: dashboard forms', (ctx) => {
  let t: TestApp
  let session: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    session = await dashboardSession(t, 'ev1@example.com')
  })

  test("F4: the dashboard's passkey form answers 500 to a body without its fields: every form answers 400 naming the field", async () => {
    const bodies: [string | undefined, string | undefined][] = [
      [undefined, undefined],
      ['application/x-www-form-urlencoded', ''],
      ['application/x-www-form-urlencoded', 'unknown=1'],
      ['application/x-www-form-urlencoded', 'csrf_token=a&csrf_token=b'],
      ['application/json', '{}'],
      ['application/json', '[]'],
    ]
    for (const url of FORMS)
      for (const [type, payload] of bodies) {
        const res = await t.request({
          method: 'POST',
          url,
          cookies: { wb_session: session },
          headers: type ? { 'content-type': type } : {},
          ...(payload === undefined ? {} : { payload }),
        })
        const what = `${url} ${type} ${JSON.stringify(payload)}: ${res.statusCode}`
        assert.ok(res.statusCode < 500, what)
        // A refusal of the form itself (not of the CSRF token, 403) is 400.
        assert.notEqual(res.statusCode, 422, what)
      }
    const passkey = await t.request({
      method: 'POST',
      url: '/dashboard/passkeys',
      cookies: { wb_session: session },
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: '',
    })
    assert.equal(passkey.statusCode, 400)
    assert.match(passkey.body, /not filled in as expected: response/)
    const unknown = await t.request({
      method: 'POST',
      url: '/dashboard/events/1/devices/1/revoke',
      cookies: { wb_session: session },
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'csrf_token=x&archive=yes',
    })
    assert.equal(unknown.statusCode, 400)
    assert.match(unknown.body, /archive/)
  })
})
