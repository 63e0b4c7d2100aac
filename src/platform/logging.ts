import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { type DestinationStream, type LevelWithSilent, stdTimeFunctions } from 'pino'
import { traceFields } from './tracing.js'

// Path segments that are themselves secrets (reset and claim tokens) never reach a log line. This
// pattern is the fallback for requests no route matched; matched ones are redacted by parameter.
const SECRET_PATH = /(\/password-reset\/(?!email-send(?:[/?#]|$))|\/holder\/links\/)[^/?#]+/gi

/**
 * Route parameters that carry a secret: a reset or claim token (`:token`), and by the same naming
 * any future `..._token`, `..._secret` or `..._key` (not `key_id`). Name a new one so.
 */
export const isSecretParam = (name: string) => /(^|_)(token|secret|key)$/.test(name)

function decodePath(path: string): string {
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}

/**
 * The path as it may be logged. The pattern is also tried on the decoded path, so a percent-encoded
 * spelling (`/admin/password%2Dreset/<token>`) is redacted as the plain one is.
 */
function redactPath(path: string): string {
  const decoded = decodePath(path)
  if (decoded !== path && decoded.search(SECRET_PATH) !== -1)
    return decoded.replace(SECRET_PATH, '$1[redacted]')
  return path.replace(SECRET_PATH, '$1[redacted]')
}

/** Redacts the query's values; a matched route's secret parameters are redacted through `route`. */
export function redactUrl(
  url: string,
  route?: { template: string; params: Record<string, unknown> },
): string {
  const q = url.indexOf('?')
  const rawPath = q === -1 ? url : url.slice(0, q)
  const path =
    route && !route.template.includes('*') && Object.keys(route.params).some(isSecretParam)
      ? // Rebuilt from the route's template, so the router's reading of the URL (decoded, any
        // spelling) is what gets redacted, not a pattern's reading of the raw text.
        route.template.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) =>
          isSecretParam(name) ? '[redacted]' : encodeURIComponent(String(route.params[name] ?? '')),
        )
      : redactPath(rawPath)
  if (q === -1) return path
  // Query values can be credentials a client put in the wrong place (?token=...); names suffice to debug.
  const names = [...new URLSearchParams(url.slice(q + 1)).keys()]
  return `${path}?${names.map((n) => `${encodeURIComponent(n)}=[redacted]`).join('&')}`
}

interface LoggedRequest {
  method: string
  url: string
  ip?: string
  routeOptions?: { url?: string }
  params?: unknown
}

interface LoggedReply {
  statusCode: number
  request?: { method?: string; routeOptions?: { url?: string } }
}

/**
 * The level of the request lines of a route called all the time by machines (probes, verify): at
 * `info` they are left out (`warn`, so their problems still show), at `debug` and `trace` they are in.
 */
export function quietRouteLevel(level: string): LevelWithSilent {
  return (level === 'info' ? 'warn' : level) as LevelWithSilent
}

/**
 * Structured JSON logs, one request id on every line of a request. Headers that carry credentials
 * are redacted, and bodies are never logged. Levels are names (`"level":"info"`) and times ISO 8601
 * in UTC (`"time":"2026-11-23T18:45:12.345Z"`), which a person reading the raw line or a log shipper
 * without pino's conventions understands; the fields are listed in docs/operations.md.
 */
export function loggerOptions(
  level: string,
  stream?: DestinationStream,
  tracing = false,
): FastifyServerOptions['logger'] {
  return {
    level,
    ...(stream ? { stream } : {}),
    // With tracing on, a line written while a span is active carries its trace_id and span_id.
    ...(tracing ? { mixin: traceFields } : {}),
    formatters: { level: (label: string) => ({ level: label }) },
    timestamp: stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.api_key',
        'req.headers["api-key"]',
        'req.headers.cookie',
        'res.headers["set-cookie"]',
      ],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: LoggedRequest) => {
        const template = req.routeOptions?.url
        const params = req.params
        const route =
          template && params && typeof params === 'object'
            ? { template, params: params as Record<string, unknown> }
            : undefined
        return { method: req.method, url: redactUrl(req.url, route), ip: req.ip }
      },
      // The completed-request line stands on its own: method, route template and status, so a
      // log search by route or status needs no join with the incoming-request line.
      res: (reply: LoggedReply) => ({
        method: reply.request?.method,
        route: reply.request?.routeOptions?.url ?? 'unmatched',
        statusCode: reply.statusCode,
      }),
    },
  }
}

/** Numeric rank of a level name, to compare levels of parsed log lines (`levelRank('warn')` is 40). */
export const LEVEL_RANK: Readonly<Record<string, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
}

/**
 * Once listening, one line names where a person goes first: the API documentation and the dashboard.
 * A wildcard address (0.0.0.0, ::) is named as localhost, which reaches it from the same machine.
 */
export function logListeningUrls(app: FastifyInstance): void {
  app.addHook('onListen', (done) => {
    const address = app.server.address()
    if (address && typeof address === 'object') {
      const wildcard = ['0.0.0.0', '::', ''].includes(address.address)
      const host = wildcard
        ? 'localhost'
        : address.family === 'IPv6'
          ? `[${address.address}]`
          : address.address
      const base = `http://${host}:${address.port}`
      app.log.info(
        { docs: `${base}/docs`, dashboard: `${base}/dashboard` },
        `wristband is serving: API documentation at ${base}/docs, dashboard at ${base}/dashboard`,
      )
    }
    done()
  })
}
