// The contract says what the service does. Every example in /openapi.json (request bodies,
// answers, error bodies, the webhook's payload) validates against the schema it illustrates, so a
// generated client or a mock server built from the document is not misled by its own examples. Every
// JSON request body and every JSON success answer carries one.
import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

interface Media {
  schema?: unknown
  example?: unknown
  examples?: Record<string, { value: unknown }>
}
interface Op {
  requestBody?: { content?: Record<string, Media> }
  responses?: Record<string, { content?: Record<string, Media> }>
}

forEachBackend(httpBackends.slice(0, 1), 'OpenAPI examples', (ctx) => {
  let t: TestApp
  let doc: {
    paths: Record<string, Record<string, Op>>
    webhooks: Record<string, Record<string, Op>>
    components: { schemas: Record<string, unknown> }
  }
  before(async () => {
    t = ctx()
    doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json()
  })

  /** Every (place, schema, example) of the document. */
  function examples() {
    const out: { where: string; schema: unknown; value: unknown }[] = []
    const media = (where: string, m: Media | undefined) => {
      if (!m?.schema) return
      if (m.example !== undefined) out.push({ where, schema: m.schema, value: m.example })
      for (const [name, e] of Object.entries(m.examples ?? {}))
        out.push({ where: `${where} (${name})`, schema: m.schema, value: e.value })
    }
    for (const [group, paths] of [
      ['paths', doc.paths],
      ['webhooks', doc.webhooks],
    ] as const)
      for (const [path, ops] of Object.entries(paths))
        for (const [method, op] of Object.entries(ops)) {
          const name = `${group} ${method.toUpperCase()} ${path}`
          media(`${name} request`, op.requestBody?.content?.['application/json'])
          for (const [status, res] of Object.entries(op.responses ?? {}))
            media(`${name} ${status}`, res.content?.['application/json'])
        }
    return out
  }

  test('every example in /openapi.json validates against its schema', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats.default(ajv)
    const all = examples()
    assert.ok(all.length > 100, `only ${all.length} examples`)
    const bad: string[] = []
    for (const { where, schema, value } of all) {
      // Component references (#/components/schemas/X) resolve inside the schema's own root.
      const validate = ajv.compile({ ...(schema as object), components: doc.components })
      if (!validate(value)) bad.push(`${where}: ${ajv.errorsText(validate.errors)}`)
    }
    assert.deepEqual(bad, [])
  })

  test('every JSON request body has an example', () => {
    const without: string[] = []
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const json = op.requestBody?.content?.['application/json']
        if (json && json.example === undefined && json.examples === undefined)
          without.push(`${method.toUpperCase()} ${path}`)
      }
    assert.deepEqual(without, [])
  })

  test('every JSON success answer has an example', () => {
    const without: string[] = []
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops))
        for (const [status, res] of Object.entries(op.responses ?? {})) {
          const json = res.content?.['application/json']
          if (/^2\d\d$/.test(status) && json && json.example === undefined && json.examples === undefined)
            without.push(`${method.toUpperCase()} ${path} ${status}`)
        }
    assert.deepEqual(without, [])
  })

  test('a broken example would be caught (the check is real)', () => {
    const ajv = new Ajv2020({ strict: false })
    addFormats.default(ajv)
    const transfer = doc.paths['/companies/transfer']!.post!.requestBody!.content!['application/json']!
    const validate = ajv.compile(transfer.schema as object)
    assert.equal(validate(transfer.example), true)
    assert.equal(validate({ ...(transfer.example as object), price_typo: 1 }), false)
    assert.equal(validate({ ...(transfer.example as object), email: 7 }), false)
  })
})
