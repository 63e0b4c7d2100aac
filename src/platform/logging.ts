import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { type DestinationStream, stdTimeFunctions } from 'pino'

// Path segments that are themselves secrets (reset and claim tokens) never reach a log line.
const SECRET_PATH = /(\/password-reset\/(?!email-send\b)|\/holder\/links\/)[^/?#]+/g

export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  const path = (q === -1 ? url : url.slice(0, q)).replace(SECRET_PATH, '$1[redacted]')
  if (q === -1) return path
  // Query values can be credentials a client put in the wrong place (?token=...); names suffice to debug.
  const names = [...new URLSearchParams(url.slice(q + 1)).keys()]
  return `${path}?${names.map((n) => `${encodeURIComponent(n)}=[redacted]`).join('&')}`
}

/**
 * Structured JSON logs, one request id on every line of a request. Headers that carry credentials
 * are redacted, and bodies are never logged. Levels are names (`"level":"info"`) and times ISO 8601
 * in UTC (`"time":"2026-11-23T18:45:12.345Z"`), which a person reading the raw line or a log shipper
 * without pino's conventions understands; the fields are listed in docs/operations.md.
 */
export function loggerOptions(level: string, stream?: DestinationStream): FastifyServerOptions['logger'] {
  return {
    level,
    ...(stream ? { stream } : {}),
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
      req: (req: { method: string; url: string; ip?: string; id?: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        ip: req.ip,
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
