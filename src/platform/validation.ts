import SerializerSelector, { type Options as SerializerOptions } from '@fastify/fast-json-stringify-compiler'
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchemaValidationError } from 'fastify/types/schema.js'
import type { ValidationIssue } from './errors.js'

// ajv-formats is CommonJS with a default export property.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default

function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes,
    // Unknown properties are an error (extra_forbidden), never silently dropped.
    removeAdditional: false,
    useDefaults: true,
    strict: false,
  })
  addFormats(ajv)
  return ajv
}

/**
 * The compilations an app has put off (`compiledOnFirstUse`, `serializersOnFirstUse`), each named by its
 * route and part: `compileAll` runs them at once, so that a schema Ajv or fast-json-stringify cannot
 * compile fails a check (the test suite compiles every route's) rather than its route's first request
 * with a 500. The app's is `app.putOffSchemas`.
 */
export class PutOffSchemas {
  private readonly all: { where: string; compile: () => unknown }[] = []

  add(where: string, compile: () => unknown): void {
    this.all.push({ where, compile })
  }

  /**
   * Compiles every one not compiled yet (each once, as its first use would): what was compiled and the
   * failures, by where.
   */
  compileAll(): { compiled: string[]; failures: { where: string; error: string }[] } {
    const failures: { where: string; error: string }[] = []
    for (const { where, compile } of this.all) {
      try {
        compile()
      } catch (err) {
        failures.push({ where, error: (err as Error).message })
      }
    }
    return { compiled: this.all.map((c) => c.where), failures }
  }
}

/** Where a route's schema is from, as `PutOffSchemas` names it. */
function routePart(route: { method?: string | string[]; url?: string }, part: string): string {
  const method = Array.isArray(route.method) ? route.method.join(',') : (route.method ?? '?')
  return `${method} ${route.url ?? '?'} ${part}`
}

/**
 * Bodies are checked strictly (a string "1" is not an integer); path, query and header values are
 * strings on the wire, so they are coerced, integers only from their canonical decimal form. Each
 * validator is compiled at its first use, and listed in `putOff` when given.
 */
export function createValidatorCompiler(putOff?: PutOffSchemas) {
  let strict: Ajv | undefined
  let coercing: Ajv | undefined
  const bodies = () => {
    strict ??= makeAjv(false)
    return strict
  }
  const strings = () => {
    coercing ??= makeAjv(true)
    return coercing
  }
  return (route: {
    schema: object
    httpPart?: string
    method?: string | string[]
    url?: string
  }): ValidateFunction => {
    const { schema, httpPart } = route
    const { lazy, now } = compiledOnFirstUse(() => {
      const validate =
        httpPart === 'body' ? bodies().compile(schema) : canonicalIntegers(schema, strings().compile(schema))
      return (schema as NulMarked)[ACCEPTS_NUL] ? validate : refusingNul(validate)
    })
    putOff?.add(routePart(route, httpPart ?? 'schema'), now)
    return lazy
  }
}

/**
 * A validator compiled at its first call rather than when Fastify asks for it. Fastify asks for every
 * route's validators (and serializers: `serializersOnFirstUse`) before the app is ready; compiling them
 * all was the largest part of a start after loading the code, paid again by every worker of a fleet,
 * for routes an instance may never be asked. A route's first request compiles its own (a millisecond
 * or so); the schemas are the code's own, every route's compiled by a test (`PutOffSchemas.compileAll`).
 */
function compiledOnFirstUse(compile: () => ValidateFunction): {
  lazy: ValidateFunction
  /** Compiles it now if not yet. */
  now: () => ValidateFunction
} {
  let validate: ValidateFunction | undefined
  const now = () => {
    validate ??= compile()
    return validate
  }
  const lazy = ((data: unknown) => {
    const compiled = now()
    const ok = compiled(data)
    lazy.errors = compiled.errors
    return ok
  }) as ValidateFunction
  return { lazy, now }
}

/**
 * Fastify's response serializers (fast-json-stringify), each built at its first answer (see
 * `compiledOnFirstUse`) and listed in `putOff`: Fastify's `buildSerializer` factory with the list bound.
 */
export function serializersOnFirstUse(putOff: PutOffSchemas) {
  return (external?: unknown, options?: SerializerOptions): SerializerSelector.SerializerCompiler => {
    // Fastify's own default builder, given the same shared schemas and options.
    const compile = SerializerSelector()(external, options)
    return (route) => {
      let serialize: SerializerSelector.Serializer | undefined
      const now = () => {
        serialize ??= compile(route)
        return serialize
      }
      const type = (route as { contentType?: string }).contentType
      putOff.add(routePart(route, `response ${route.httpStatus}${type ? ` ${type}` : ''}`), now)
      return (doc) => now()(doc)
    }
  }
}

/** Marks a request schema whose strings may hold U+0000 (see `acceptingNul`). */
const ACCEPTS_NUL = Symbol('wristband.acceptsNul')
type NulMarked = { [ACCEPTS_NUL]?: true }

/**
 * Exempts one request schema from the NUL rule (`refusingNul`): for an input where a NUL is just
 * another character that matches nothing and is stored nowhere (POST /tokens/verify: such a token is
 * an invalid one, as its fast lane answers). A symbol, so the OpenAPI document does not show it.
 */
export function acceptingNul<T extends object>(schema: T): T {
  ;(schema as NulMarked)[ACCEPTS_NUL] = true
  return schema
}

/** The `type` of the 422 issue for a string holding U+0000. */
export const NUL_ISSUE_TYPE = 'string_nul_character'

function escapeSegment(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

/** JSON bodies whose text had no `\u0000` escape, the only way JSON writes a NUL (`markedNulFree`). */
const nulFree = new WeakSet<object>()

/**
 * Called by the JSON body parser with the parsed value and its text: a text without the six characters
 * `\u0000` holds no NUL, so its value is not walked again (a 500-scan batch costs a search of its
 * text, a few microseconds, instead of a walk over its 1,500 strings).
 */
export function markedNulFree<T>(value: T, text: string): T {
  if (typeof value === 'object' && value !== null && !text.includes('\\u0000')) nulFree.add(value)
  return value
}

/**
 * Whether a string in `data`, or an object key, holds U+0000: each looked at once, without recursion
 * (a body may nest thousands of levels deep) and without building a path.
 */
function holdsNul(data: unknown): boolean {
  if (typeof data === 'object' && data !== null && nulFree.has(data)) return false
  const pending: unknown[] = [data]
  while (pending.length > 0) {
    const value = pending.pop()
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return true
    } else if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) pending.push(value[i])
    } else if (value !== null && typeof value === 'object') {
      // A parsed body, query or path: plain objects, nothing enumerable inherited.
      for (const key in value) {
        if (key.includes('\u0000')) return true
        pending.push((value as Record<string, unknown>)[key])
      }
    }
  }
  return false
}

/** The places (JSON pointers) of the strings in `data` that hold U+0000, object keys included. */
function nulPlaces(data: unknown): string[] {
  const places: string[] = []
  const pending: [unknown, string][] = [[data, '']]
  while (pending.length > 0) {
    const [value, at] = pending.pop()!
    if (typeof value === 'string') {
      if (value.includes('\u0000')) places.push(at)
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], `${at}/${i}`])
    } else if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value)
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!
        const place = `${at}/${escapeSegment(key)}`
        if (key.includes('\u0000')) places.push(place)
        else pending.push([(value as Record<string, unknown>)[key], place])
      }
    }
  }
  return places
}

/** Where an error points, with the property it names for `required` and `additionalProperties`. */
function placeOf(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>
  if (e.keyword === 'required') return `${e.instancePath}/${escapeSegment(String(p.missingProperty))}`
  if (e.keyword === 'additionalProperties')
    return `${e.instancePath}/${escapeSegment(String(p.additionalProperty))}`
  return e.instancePath
}

/**
 * Wraps a validator so a string holding U+0000 (NUL), in a body, a path, a query or a header, is a 422
 * `string_nul_character` at its `loc` (a key holding one, at the key), reported with the other problems
 * of the same input: PostgreSQL stores no NUL in text (SQLite would), so the character would otherwise
 * be a 500 on one backend and stored on the other. The input is looked at before the validator
 * coerces it, in one pass over it; a JSON body whose text has no `\u0000` escape is not walked at all
 * (`markedNulFree`).
 */
function refusingNul(validate: ValidateFunction): ValidateFunction {
  const wrapped = ((data: unknown) => {
    const places = holdsNul(data) ? nulPlaces(data) : []
    const ok = validate(data)
    if (places.length === 0) {
      wrapped.errors = validate.errors
      return ok
    }
    const own: ErrorObject[] = places.map((instancePath) => ({
      keyword: 'nul',
      instancePath,
      schemaPath: '#/nul',
      params: {},
      message: 'must not contain U+0000',
    }))
    // One issue per place: the NUL one, not also a pattern or length the same string misses.
    const others = (validate.errors ?? []).filter((e) => {
      const at = placeOf(e)
      return !places.some((p) => at === p || at.startsWith(`${p}/`))
    })
    wrapped.errors = [...own, ...others]
    return false
  }) as ValidateFunction
  wrapped.schema = validate.schema
  return wrapped
}

type JsonSchema = {
  type?: string | string[]
  minimum?: number
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  items?: JsonSchema
  properties?: Record<string, JsonSchema>
}

/** The integer schema a value of this schema is coerced to, if any (a plain integer, or one in a union with null). */
function integerSchema(s: JsonSchema | undefined): JsonSchema | undefined {
  if (!s) return undefined
  if (s.type === 'integer') return s
  const branches = s.anyOf ?? s.oneOf
  if (!branches?.every((b) => b.type === 'integer' || b.type === 'null')) return undefined
  return branches.find((b) => b.type === 'integer')
}

/**
 * Whether a string from the URL or a header is an integer written the one way: `0` or `[1-9][0-9]*`
 * (a leading minus only where the schema allows negatives), and exactly representable. ajv's
 * coercion alone takes whatever `Number()` takes: `0x10`, `1e1`, ` 1`, `+1`, `1.0`, `0b1`, a byte
 * order mark, so `DELETE /tokens/api-key/0x10` would name key 16.
 */
export function isCanonicalInteger(value: string, allowNegative = false): boolean {
  if (!(allowNegative ? /^(0|-?[1-9][0-9]*)$/ : /^(0|[1-9][0-9]*)$/).test(value)) return false
  return Number.isSafeInteger(Number(value))
}

/**
 * Wraps the coercing validator of a path, query or header schema: every integer field (or list item)
 * given in another form than canonical decimal is a type error at its place (422 int_parsing), with
 * the other problems of the same input. The input itself is never rewritten.
 */
function canonicalIntegers(schema: object, validate: ValidateFunction): ValidateFunction {
  const fields = Object.entries((schema as JsonSchema).properties ?? {}).flatMap(([name, s]) => {
    const single = integerSchema(s)
    const item = s.type === 'array' ? integerSchema(s.items) : undefined
    const int = single ?? item
    return int ? [{ name, negative: (int.minimum ?? 0) < 0 }] : []
  })
  if (fields.length === 0) return validate
  const rejected = (v: unknown, negative: boolean) =>
    typeof v === 'string' && !isCanonicalInteger(v, negative)
  const wrapped = ((data: unknown) => {
    const input = (data ?? {}) as Record<string, unknown>
    const bad: string[] = []
    for (const { name, negative } of fields) {
      const v = input[name]
      const list = Array.isArray(v) ? v : [v]
      list.forEach((item, i) => {
        if (rejected(item, negative)) bad.push(Array.isArray(v) ? `/${name}/${i}` : `/${name}`)
      })
    }
    if (bad.length === 0) {
      const ok = validate(data)
      wrapped.errors = validate.errors
      return ok
    }
    // The rest is checked on a copy with the bad values replaced, so the 422 lists every problem.
    const copy: Record<string, unknown> = { ...input }
    for (const { name } of fields) {
      const v = copy[name]
      if (Array.isArray(v)) copy[name] = v.map((item, i) => (bad.includes(`/${name}/${i}`) ? 0 : item))
      else if (bad.includes(`/${name}`)) copy[name] = 0
    }
    validate(copy)
    const own: ErrorObject[] = bad.map((instancePath) => ({
      keyword: 'type',
      instancePath,
      schemaPath: '#/canonicalInteger',
      params: { type: 'integer' },
      message: 'must be an integer in canonical decimal form',
    }))
    const others = (validate.errors ?? []).filter(
      (e) => !bad.some((b) => e.instancePath === b || e.instancePath.startsWith(`${b}/`)),
    )
    wrapped.errors = [...own, ...others]
    return false
  }) as ValidateFunction
  wrapped.schema = validate.schema
  return wrapped
}

const partNames: Record<string, string> = {
  body: 'body',
  params: 'path',
  querystring: 'query',
  headers: 'header',
}

function valueAt(root: unknown, segments: (string | number)[]): unknown {
  let cur = root
  for (const seg of segments) {
    if (cur === null || typeof cur !== 'object') return undefined
    cur = (cur as Record<string | number, unknown>)[seg]
  }
  return cur
}

function pathSegments(instancePath: string): (string | number)[] {
  if (!instancePath) return []
  return instancePath
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s))
}

/** Echoed inputs are kept short so a 422 never mirrors a huge payload back. */
function shortInput(v: unknown): unknown {
  if (typeof v === 'string') return v.length > 100 ? `${v.slice(0, 100)}…` : v
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return v
  return undefined
}

function describe(e: ErrorObject, input: unknown, part: string): { type: string; msg: string; ctx?: object } {
  const p = e.params as Record<string, unknown>
  switch (e.keyword) {
    case 'required':
      return { type: 'missing', msg: 'Field required' }
    case 'additionalProperties':
      return { type: 'extra_forbidden', msg: 'Extra inputs are not permitted' }
    case 'minLength':
      return {
        type: 'string_too_short',
        msg: `String should have at least ${p.limit} character${p.limit === 1 ? '' : 's'}`,
        ctx: { min_length: p.limit },
      }
    case 'maxLength':
      return {
        type: 'string_too_long',
        msg: `String should have at most ${p.limit} characters`,
        ctx: { max_length: p.limit },
      }
    case 'pattern':
      return {
        type: 'string_pattern_mismatch',
        msg: `String should match pattern '${p.pattern}'`,
        ctx: { pattern: p.pattern },
      }
    case 'enum':
    case 'const': {
      const allowed = (p.allowedValues as unknown[] | undefined) ?? [p.allowedValue]
      const expected = allowed.map((v) => `'${String(v)}'`).join(', ')
      return { type: 'literal_error', msg: `Input should be ${expected}`, ctx: { expected } }
    }
    case 'minimum':
    case 'exclusiveMinimum':
      return {
        type: e.keyword === 'minimum' ? 'greater_than_equal' : 'greater_than',
        msg: `Input should be ${e.keyword === 'minimum' ? 'greater than or equal to' : 'greater than'} ${p.limit}`,
        ctx: { limit: p.limit },
      }
    case 'maximum':
    case 'exclusiveMaximum':
      return {
        type: e.keyword === 'maximum' ? 'less_than_equal' : 'less_than',
        msg: `Input should be ${e.keyword === 'maximum' ? 'less than or equal to' : 'less than'} ${p.limit}`,
        ctx: { limit: p.limit },
      }
    case 'minItems':
      return {
        type: 'too_short',
        msg: `List should have at least ${p.limit} items`,
        ctx: { min_length: p.limit },
      }
    case 'maxItems':
      return {
        type: 'too_long',
        msg: `List should have at most ${p.limit} items`,
        ctx: { max_length: p.limit },
      }
    case 'nul':
      return { type: NUL_ISSUE_TYPE, msg: 'String should not contain the NUL character (U+0000)' }
    case 'uniqueItems':
      return { type: 'value_error', msg: 'Value error, items must be unique' }
    case 'type': {
      const t = String(p.type).split(',')[0]
      if (t === 'integer' || t === 'number') {
        const parsing = typeof input === 'string' || part !== 'body'
        const kind = t === 'integer' ? 'int' : 'float'
        return parsing
          ? {
              type: `${kind}_parsing`,
              msg: `Input should be a valid ${t === 'integer' ? 'integer' : 'number'}, unable to parse string as ${t === 'integer' ? 'an integer' : 'a number'}`,
            }
          : { type: `${kind}_type`, msg: `Input should be a valid ${t === 'integer' ? 'integer' : 'number'}` }
      }
      if (t === 'string') return { type: 'string_type', msg: 'Input should be a valid string' }
      if (t === 'boolean') return { type: 'bool_type', msg: 'Input should be a valid boolean' }
      if (t === 'array') return { type: 'list_type', msg: 'Input should be a valid list' }
      if (t === 'object') return { type: 'model_type', msg: 'Input should be a valid dictionary or object' }
      return { type: 'value_error', msg: `Input should be of type ${t}` }
    }
    default:
      return { type: 'value_error', msg: `Value error, ${e.message ?? 'invalid value'}` }
  }
}

/** Turns ajv's errors into the HTTPValidationError `detail` list, one entry per field problem. */
export function toValidationIssues(
  errors: FastifySchemaValidationError[],
  context: string,
  data: unknown,
): ValidationIssue[] {
  const part = partNames[context] ?? context
  const all = errors as unknown as ErrorObject[]
  // For a union (anyOf, e.g. integer|null) ajv reports every branch; keep one message per location.
  const unionPaths = new Set(all.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath))
  const seen = new Set<string>()
  const issues: ValidationIssue[] = []
  for (const e of all) {
    if (e.keyword === 'anyOf') continue
    if (
      e.keyword === 'type' &&
      (e.params as { type?: string }).type === 'null' &&
      unionPaths.has(e.instancePath)
    )
      continue
    const segments = pathSegments(e.instancePath)
    const p = e.params as Record<string, unknown>
    if (e.keyword === 'required') segments.push(String(p.missingProperty))
    if (e.keyword === 'additionalProperties') segments.push(String(p.additionalProperty))
    const key = `${segments.join('\u0000')}|${unionPaths.has(e.instancePath) ? '' : e.keyword}`
    if (seen.has(key)) continue
    seen.add(key)
    const input = valueAt(data, segments)
    const d =
      data === undefined && segments.length === 0
        ? { type: 'missing', msg: 'Field required' }
        : describe(e, input, part)
    const issue: ValidationIssue = { loc: [part, ...segments], msg: d.msg, type: d.type }
    const shown = e.keyword === 'required' ? undefined : shortInput(input)
    if (shown !== undefined) issue.input = shown
    if (d.ctx) issue.ctx = d.ctx as Record<string, unknown>
    issues.push(issue)
  }
  return issues
}
