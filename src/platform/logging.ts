import type { FastifyServerOptions } from 'fastify'
import type { DestinationStream } from 'pino'

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
 * are redacted, and bodies are never logged.
 */
export function loggerOptions(level: string, stream?: DestinationStream): FastifyServerOptions['logger'] {
  return {
    level,
    ...(stream ? { stream } : {}),
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
