import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { seedPartner } from '../../test/helpers/partner.js'

/**
 * Integers in paths and query strings are canonical decimal only (`0` or `[1-9][0-9]*`, in range):
 * every other spelling `Number()` would take is 422 int_parsing, so `DELETE /tokens/api-key/0x10`
 * cannot name key 16. Checked on the attack itself and on every integer parameter of /openapi.json.
 */
const NON_CANONICAL = (n: number) => [
  `0x${n.toString(16)}`,
  `0X${n.toString(16)}`,
  `0b${n.toString(2)}`,
  `0o${n.toString(8)}`,
  `${n}e0`,
  `${n}.0`,
  `+${n}`,
  ` ${n}`,
  `${n} `,
  `\t${n}`,
  `\uFEFF${n}`,
  `0${n}`,
  `${n}\n`,
  `${'9'.repeat(20)}`,
]

interface Parameter {
  in: string
  name: string
  required?: boolean
  schema?: { type?: string; maximum?: number; enum?: string[]; anyOf?: { type?: string }[] }
}

const isInteger = (p: Parameter) =>
  p.schema?.type === 'integer' || (p.schema?.anyOf?.some((s) => s.type === 'integer') ?? false)

forEachBackend(httpBackends, 'integers in paths and queries are canonical decimal', (ctx) => {
  let t: TestApp
  let bearer: string
  let apiKey: string
  let session: string
  before(async () => {
    t = ctx()
    apiKey = (await seedPartner(t)).write
    bearer = (await login(t, 'root@example.com')).access_token
    session = await dashboardSession(t, 'partner1')
  })

  test('DELETE /tokens/api-key/0x10 and every other spelling of a key id is 422 int_parsing and revokes nothing', async () => {
    const created = await t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: bearer,
      payload: { event_id: 1, name: 'canonical', scopes: ['api:read'] },
    })
    assert.equal(created.statusCode, 200, created.body)
    const id: number = created.json().id
    for (const form of NON_CANONICAL(id)) {
      const res = await t.request({
        method: 'DELETE',
        url: `/tokens/api-key/${encodeURIComponent(form)}`,
        token: bearer,
      })
      assert.equal(res.statusCode, 422, `${JSON.stringify(form)}: ${res.body}`)
      const [issue] = res.json().detail
      assert.deepEqual(issue.loc, ['path', 'key_id'], JSON.stringify(form))
      assert.equal(issue.type, 'int_parsing', JSON.stringify(form))
      assert.equal(issue.input, form)
    }
    const listed = await t.request({ method: 'GET', url: '/tokens/api-keys?event_id=1', token: bearer })
    const key = listed.json().find((k: { id: number }) => k.id === id)
    assert.equal(key.revoked_at, null, 'a non-canonical id revoked the key')
    const revoked = await t.request({ method: 'DELETE', url: `/tokens/api-key/${id}`, token: bearer })
    assert.equal(revoked.statusCode, 200, revoked.body)
  })

  test('every integer parameter of /openapi.json answers 422 int_parsing to every non-canonical form', async () => {
    const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json()
    const checked: string[] = []
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const params = ((op as { parameters?: Parameter[] }).parameters ?? []).filter(
          (p) => p.in === 'path' || p.in === 'query',
        )
        const htmlPage = JSON.stringify((op as { responses?: unknown }).responses ?? {}).includes('text/html')
        const valid = (p: Parameter) => (isInteger(p) ? '1' : (p.schema?.enum?.[0] ?? 'x'))
        for (const target of params.filter(isInteger)) {
          const send = (value: string) => {
            let url = path
            const query = new URLSearchParams()
            for (const p of params) {
              const v = p === target ? value : valid(p)
              if (p.in === 'path') url = url.replace(`{${p.name}}`, encodeURIComponent(v))
              else if (p === target || p.required) query.set(p.name, v)
            }
            const qs = query.toString()
            return t.request({
              method: method.toUpperCase() as 'GET',
              url: qs ? `${url}?${qs}` : url,
              headers: { authorization: `Bearer ${bearer}`, api_key: apiKey },
              cookies: { wb_session: session },
              ...(['POST', 'PUT', 'PATCH'].includes(method.toUpperCase()) ? { payload: {} } : {}),
            })
          }
          const loc = JSON.stringify([target.in, target.name])
          const intIssue = (body: string) =>
            (JSON.parse(body) as { detail?: unknown }).detail as { loc: unknown[]; type: string }[] | string
          // A canonical value no record has (so nothing is deleted) passes this parameter's check,
          // whatever else the request lacks, and the credentials reach validation.
          const control = await send(String(Math.min(target.schema?.maximum ?? 999_999, 999_999)))
          assert.notEqual(control.statusCode, 401, `${method} ${path}: ${control.body}`)
          const controlDetail = control.statusCode === 422 ? intIssue(control.body) : []
          assert.ok(
            Array.isArray(controlDetail) && !controlDetail.some((d) => JSON.stringify(d.loc) === loc),
            `${method} ${path} ${target.name}=1: ${control.body}`,
          )
          for (const form of NON_CANONICAL(1)) {
            const res = await send(form)
            const what = `${method.toUpperCase()} ${path} ${target.name}=${JSON.stringify(form)}`
            assert.equal(res.statusCode, 422, `${what}: ${res.statusCode} ${res.body}`)
            // A dashboard page answers its generic HTML error page, as for any other bad input.
            if (String(res.headers['content-type']).startsWith('text/html') && htmlPage) continue
            const detail = intIssue(res.body)
            assert.ok(Array.isArray(detail), `${what}: ${res.body}`)
            const issue = detail.find((d) => JSON.stringify(d.loc) === loc)
            assert.equal(issue?.type, 'int_parsing', `${what}: ${res.body}`)
          }
          checked.push(`${method.toUpperCase()} ${path} ${target.name}`)
        }
      }
    }
    // The walk found the parameters it is about (a renamed route must not empty it silently).
    for (const known of ['DELETE /tokens/api-key/{key_id} key_id', 'GET /tokens/api-keys event_id'])
      assert.ok(checked.includes(known), `not walked: ${known}; walked: ${checked.join(', ')}`)
  })
})
