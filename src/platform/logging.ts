import type { FastifyServerOptions } from 'fastify'
import type { DestinationStream } from 'pino'

// Path segments that are themselves secrets (reset and claim tokens) never reach a log line.
const SECRET_PATH = /(\/password-reset\/(?!email-send\b)|\/holder\/links\/)[^/?#]+/g

export function redactUrl(url: string): string {
  return url.replace(SECRET_PATH, '$1[redacted]')
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
