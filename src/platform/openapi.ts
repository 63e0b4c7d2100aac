import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import { bodyFieldOf, ERROR_CODES } from './errors.js'
import type { ErrorCase, FeatureOpenApi, OperationDoc } from './openapi-operations.js'
import { registerDocsPolicy } from './security-headers.js'

/** The parts of an OpenAPI 3.1 document this module reads and completes. */
interface Media {
  schema?: unknown
  example?: unknown
  examples?: Record<string, { summary?: string; value: unknown }>
}
interface Response {
  description: string
  headers?: Record<string, unknown>
  content?: Record<string, Media>
}
interface Parameter {
  in: string
  name: string
  example?: unknown
}
interface Operation {
  operationId?: string
  summary?: string
  tags?: string[]
  security?: Record<string, unknown>[]
  parameters?: Parameter[]
  requestBody?: { required?: boolean; content?: Record<string, Media> }
  responses?: Record<string, Response>
}
export interface OpenApiDocument {
  tags?: { name: string; description?: string }[]
  servers?: { url: string; description?: string }[]
  paths: Record<string, Record<string, Operation>>
  [key: string]: unknown
}

/** What each error status means, whatever the route (the first sentence of its description). */
const ERROR_MEANING: Record<string, { text: string; detail: string }> = {
  '400': {
    text: 'Bad request: the request is well-formed but cannot be carried out',
    detail: 'Invalid code',
  },
  '401': {
    text: 'Unauthorized: the credential is missing, invalid, expired or revoked (`WWW-Authenticate: Bearer`)',
    detail: 'Could not validate credentials',
  },
  '403': {
    text: 'Forbidden: the credential is valid but lacks the role, scope or event',
    detail: 'Not enough permissions',
  },
  '404': { text: 'Not found', detail: 'Not found' },
  '409': { text: 'Conflict with the current state', detail: 'Conflict' },
  '410': { text: 'Gone: the link or token has expired or was used', detail: 'This link has expired' },
  '422': {
    text: 'Validation error: the body, query, path or a header does not match the schema. Body: `{"detail": [{"loc", "msg", "type", "input"}]}`, one entry per problem, `loc` the path to the field (e.g. `["body", "price"]`)',
    detail: '',
  },
  '429': {
    text: 'Too many requests: wait `Retry-After` seconds before trying again',
    detail: 'Rate limit exceeded',
  },
  '503': {
    text: 'Service unavailable: a dependency is unreachable and nothing was changed; retry later',
    detail: 'Service temporarily unavailable',
  },
}

const RATE_LIMITED: ErrorCase = {
  code: 'rate_limit_exceeded',
  when: ERROR_CODES.rate_limit_exceeded.when,
  detail: 'Rate limit exceeded',
  extra: { limit: 120, retry_after: 17 },
}

const VALIDATION_EXAMPLE = {
  detail: [
    {
      loc: ['body', 'price'],
      msg: 'Input should be less than or equal to 1000000000',
      type: 'less_than_equal',
      input: 1000000000.5,
    },
  ],
}

const isSuccess = (status: string) => /^2\d\d$|^3\d\d$/.test(status)

/**
 * What a route's own settings (not its schema) say about the headers of its answers: a rate-limited
 * route (`config.rateLimit`) answers with the `X-RateLimit-*` counts, one limited per credential also
 * with the IETF `RateLimit-*`, and a route that takes an `Idempotency-Key` may replay its first answer.
 */
export interface AnswerHeaders {
  limited: boolean
  perCredential: boolean
  idempotent: boolean
}

/** What the document learns of a route beyond its schema's standard fields: its answer headers and texts. */
interface RouteNotes extends AnswerHeaders {
  /** The texts of the route's schema (`doc`). */
  doc: OperationDoc | undefined
}

const count = (text: string) => ({ description: text, schema: { type: 'integer', minimum: 0 } })
const LIMIT = 'Requests allowed per window (one minute)'
const REMAINING = 'Requests left in the current window'
const RESET = 'Seconds until the current window ends'
/** The answer headers the document declares, once, in `components.headers`. */
const HEADERS: Record<string, { description: string; schema: Record<string, unknown> }> = {
  'X-RateLimit-Limit': count(`${LIMIT}; per address, or per credential where the route counts one`),
  'X-RateLimit-Remaining': count(REMAINING),
  'X-RateLimit-Reset': count(RESET),
  'RateLimit-Limit': count(`${LIMIT} of this credential (IETF RateLimit header fields)`),
  'RateLimit-Remaining': count(`${REMAINING} of this credential`),
  'RateLimit-Reset': count(RESET),
  'Retry-After': {
    description: 'Seconds to wait before the next attempt',
    schema: { type: 'integer', minimum: 1 },
  },
  'Idempotent-Replayed': {
    description: 'Present (`true`) when this is the first answer to the same Idempotency-Key, replayed',
    schema: { type: 'string', enum: ['true'] },
  },
}
const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` })

/** The headers an answer of `status` may carry, as references into `components.headers`. */
function answerHeadersOf(status: string, route: AnswerHeaders | undefined): Record<string, unknown> {
  const names: string[] = []
  if (route?.limited) names.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset')
  if (route?.perCredential) names.push('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset')
  if (status === '429') names.push('Retry-After')
  // Answers up to 4xx are kept and replayed; 429 comes before the route runs, 5xx is never kept.
  if (route?.idempotent && status !== '429' && !status.startsWith('5')) names.push('Idempotent-Replayed')
  return Object.fromEntries(names.map((n) => [n, headerRef(n)]))
}

const fieldOf = (c: ErrorCase): string => bodyFieldOf(c.code) ?? 'error'

function describeError(status: string, codes: ErrorCase[]): string {
  const meaning = ERROR_MEANING[status]?.text ?? `HTTP ${status}`
  if (status === '422') return `${meaning}.`
  if (!codes.length) return `${meaning}. Body: \`{"detail": "<message>"}\`; no \`error\` code.`
  const list = codes.map((c) => `\`${fieldOf(c)}\`: \`${c.code}\` when ${c.when}`).join('; ')
  return `${meaning}. Body: \`{"detail": "<message>", ...}\` with ${list}.`
}

function errorExample(c: ErrorCase) {
  return { summary: c.when, value: { detail: c.detail, [fieldOf(c)]: c.code, ...c.extra } }
}

/** The features' texts as one: each key (operation, tag, parameter, webhook) may come from one feature only. */
export function mergeFeatureOpenApi(features: readonly FeatureOpenApi[]): Required<FeatureOpenApi> {
  const merged: Required<FeatureOpenApi> = { tags: {}, params: {}, webhooks: {} }
  for (const feature of features)
    for (const part of ['tags', 'params', 'webhooks'] as const)
      for (const [key, value] of Object.entries(feature[part] ?? {})) {
        if (key in merged[part]) throw new Error(`OpenAPI: ${part} "${key}" is given by two features`)
        ;(merged[part] as Record<string, unknown>)[key] = value
      }
  return merged
}

function finishOperation(
  op: Operation,
  doc: OperationDoc | undefined,
  params: Record<string, string>,
  route: AnswerHeaders | undefined,
): void {
  if (doc && !op.operationId) op.operationId = doc.operationId
  // Declared on every operation, so a reader (and the linter) sees "no credential" was meant.
  op.security ??= []
  for (const p of op.parameters ?? [])
    if (p.in === 'path' && p.example === undefined && params[p.name] !== undefined) p.example = params[p.name]
  // Every media type the operation takes (JSON, and a form for the OAuth endpoints) shows the example.
  if (doc?.request !== undefined)
    for (const media of Object.values(op.requestBody?.content ?? {})) media.example = doc.request
  if (op.requestBody && doc?.bodyOptional) op.requestBody.required = false

  for (const [status, res] of Object.entries(op.responses ?? {})) {
    const headers = answerHeadersOf(status, route)
    if (Object.keys(headers).length) res.headers = { ...res.headers, ...headers }
    const json = res.content?.['application/json']
    if (isSuccess(status)) {
      if (doc && status.startsWith('2')) res.description = doc.returns
      if (json && doc?.response !== undefined && status.startsWith('2')) json.example = doc.response
      continue
    }
    const codes = status === '429' ? [RATE_LIMITED] : (doc?.errors?.[Number(status)] ?? [])
    if (!json) {
      // An HTML page (the dashboard's forms): the status's meaning, said for a browser.
      res.description = `${ERROR_MEANING[status]?.text ?? `HTTP ${status}`} (an HTML page)`
      continue
    }
    const ref = (json.schema as { $ref?: string } | undefined)?.$ref ?? ''
    if (!/\/(ErrorBody|HTTPValidationError|RateLimited)$/.test(ref)) {
      // A body of its own (the readiness report): its schema says it all.
      res.description = ERROR_MEANING[status]?.text ?? `HTTP ${status}`
      continue
    }
    res.description = describeError(status, codes)
    if (status === '422') json.example = VALIDATION_EXAMPLE
    else if (codes.length) json.examples = Object.fromEntries(codes.map((c) => [c.code, errorExample(c)]))
    else json.example = { detail: ERROR_MEANING[status]?.detail ?? 'Error' }
  }
}

/**
 * Completes the document @fastify/swagger built from the route schemas: operationIds, response
 * descriptions and examples from each route's texts (its schema's `doc`), the meaning and `error`
 * codes of every error status, and the list of tags. Registered as the plugin's `transformObject`.
 */
export function finishDocument(
  input: OpenApiDocument,
  features: readonly FeatureOpenApi[] = [],
  /** Each route's answer headers and texts, by `METHOD /path` as the document writes the path. */
  routes: ReadonlyMap<string, RouteNotes> = new Map(),
): OpenApiDocument {
  const doc = structuredClone(input)
  doc.components = { ...(doc.components as object), headers: HEADERS }
  const { tags, params, webhooks } = mergeFeatureOpenApi(features)
  // OpenAPI 3.1: the requests the service sends (the features' notifications), not paths it serves.
  if (Object.keys(webhooks).length) doc.webhooks = structuredClone(webhooks)
  const used = new Set<string>()
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const key = `${method.toUpperCase()} ${path}`
      finishOperation(op, routes.get(key)?.doc, params, routes.get(key))
      for (const t of op.tags ?? []) used.add(t)
    }
  }
  doc.tags = [...used].sort().map((name) => ({ name, ...(tags[name] ? { description: tags[name] } : {}) }))
  doc.servers ??= [{ url: '/', description: 'This service' }]
  return doc
}

/** A plain text mark, so the API reference carries the service's name instead of a framework's logo. */
const LOGO = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="170" height="40" viewBox="0 0 170 40">' +
    '<rect x="2" y="12" width="30" height="16" rx="8" fill="none" stroke="#fff" stroke-width="4"/>' +
    '<text x="42" y="28" font-family="sans-serif" font-size="22" font-weight="bold" fill="#fff">wristband</text>' +
    '</svg>',
)
const FAVICON = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">' +
    '<rect x="3" y="9" width="26" height="14" rx="7" fill="none" stroke="#1b6ac9" stroke-width="4"/></svg>',
)

/** @fastify/swagger-ui options: the page titled and marked for wristband. */
const docsUiTheme = {
  logo: { type: 'image/svg+xml', content: LOGO, href: '/docs', target: '_self' as const },
  theme: {
    title: 'wristband API reference',
    favicon: [
      { filename: 'favicon.svg', rel: 'icon', sizes: 'any', type: 'image/svg+xml', content: FAVICON },
    ],
  },
}

/**
 * The OpenAPI document (`/openapi.json`, also `/docs/json`) built from the route schemas and
 * completed by `finishDocument`, and the API reference at `/docs`. Registered before the routes, so
 * that every route is in the document.
 */
export async function registerOpenApi(
  app: FastifyInstance,
  /**
   * `version`: the interface's version (`info.version`), which changes with the interface, not with
   * every release; `release`: the release serving it (`info.x-release`), as `GET /` tells it.
   */
  versions: { version: string; release: string },
  /** Each feature's texts that are no one route's (tags, path-parameter examples, its `webhooks`): src/openapi.ts. */
  features: readonly FeatureOpenApi[],
): Promise<void> {
  // Merged once here, so that a key two features give fails the start, not the first read of /openapi.json.
  mergeFeatureOpenApi(features)
  // A specification extension (`x-…`), which OpenAPI allows in `info` and the plugin's types do not list.
  const info = {
    title: 'wristband',
    version: versions.version,
    'x-release': versions.release,
    description: 'Authentication, token and ticket-partner service of the event platform.',
  }
  const routes = new Map<string, RouteNotes>()
  await app.register(swagger, {
    // The answer headers a route's settings give it (its rate limit, its Idempotency-Key) and its
    // schema's texts (`doc`, which is no part of the plugin's schema), noted while the document is
    // built and declared by `finishDocument`.
    transform: ({ schema, url, route }) => {
      const limit = (route.config as { rateLimit?: { credential?: unknown } } | undefined)?.rateLimit
      const path = url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
      const idempotent = 'idempotency-key' in ((schema?.headers as { properties?: object })?.properties ?? {})
      const { doc, ...rest } = (schema ?? {}) as { doc?: OperationDoc }
      for (const method of [route.method].flat())
        routes.set(`${method} ${path}`, {
          limited: limit !== undefined,
          perCredential: limit?.credential !== undefined,
          idempotent,
          doc,
        })
      return { schema: schema && rest, url }
    },
    // Shared schemas keep their names (HTTPValidationError, ...) in the document instead of def-N.
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    // operationIds, examples, response descriptions and error codes: each route's `doc`.
    transformObject: (built) =>
      'openapiObject' in built
        ? (finishDocument(
            built.openapiObject as unknown as OpenApiDocument,
            features,
            routes,
          ) as typeof built.openapiObject)
        : built.swaggerObject,
    openapi: {
      openapi: '3.1.0',
      info,
      components: {
        securitySchemes: {
          // The dashboard's own JSON, read by its pages with the session cookie of /dashboard/login.
          DashboardSession: { type: 'apiKey', in: 'cookie', name: 'wb_session' },
          OAuth2PasswordBearer: {
            type: 'oauth2',
            flows: { password: { tokenUrl: '/auth/login', scopes: {} } },
          },
          APIKeyHeader: { type: 'apiKey', in: 'header', name: 'api_key' },
          // A verify credential (an API key with scope tokens:verify) sent as a Bearer token (introspection).
          VerifyCredentialBearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'A verify credential: an API key with scope `tokens:verify`',
          },
        },
      },
    },
  })
  // The docs pages get their own CSP (their scripts and styles come from the service itself).
  registerDocsPolicy(app, '/docs')
  await app.register(swaggerUi, { routePrefix: '/docs', ...docsUiTheme })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
