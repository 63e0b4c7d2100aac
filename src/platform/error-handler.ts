import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, ValidationFailed, type ValidationIssue } from './errors.js'
import { toValidationIssues } from './validation.js'

function sendValidation(reply: FastifyReply, detail: ValidationIssue[]) {
  return reply.code(422).send({ detail })
}

/** Errors raised by a database driver when the server cannot be reached. */
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code
  return (
    code === 'ECONNREFUSED' ||
    code === 'ECONNRESET' ||
    code === 'ETIMEDOUT' ||
    code === 'EPIPE' ||
    code === 'ENOTFOUND' ||
    code === '57P01' || // admin_shutdown
    code === '57P03' || // cannot_connect_now
    code === '57014' || // query_canceled: DATABASE_STATEMENT_TIMEOUT_SECONDS ran out
    code === '08006' ||
    code === '08001' ||
    code === 'SQLITE_BUSY' ||
    /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(
      (err as Error)?.message ?? '',
    )
  )
}

/**
 * The one place where errors become HTTP answers: domain errors get their documented bodies,
 * framework errors about the request get a 4xx, and anything unexpected is logged and answered
 * with a bare 500 that leaks nothing.
 */
export function registerErrorHandler(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    return answer(err, request, reply)
  })
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ detail: 'Not Found' }))
}

function answer(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (err.validation) {
    return sendValidation(
      reply,
      toValidationIssues(
        err.validation,
        err.validationContext ?? 'body',
        dataOf(request, err.validationContext),
      ),
    )
  }
  if (err instanceof ValidationFailed) return sendValidation(reply, err.issues)
  if (err instanceof AppError) {
    if (err.statusCode >= 500) request.log.warn({ err }, 'dependency unavailable')
    return reply
      .code(err.statusCode)
      .headers(err.headers)
      .send({ detail: err.message, ...err.extra })
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return sendValidation(reply, [
        { loc: ['body'], msg: 'JSON decode error', type: 'json_invalid', ctx: { error: err.message } },
      ])
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return reply.code(413).send({ detail: 'Request body too large' })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return reply.code(415).send({ detail: 'Unsupported media type: send application/json' })
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return reply.code(400).send({ detail: 'Invalid Content-Length' })
  }
  // A body that is not valid UTF-8 or otherwise unparsable by the JSON parser.
  if (err instanceof SyntaxError) {
    return sendValidation(reply, [{ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid' }])
  }
  // PostgreSQL refused a number that passed the schema but does not fit its column (an id beyond
  // 32 bits): bad input, not a fault. SQLite stores 64-bit integers and never gets here.
  if (err.code === '22003') {
    return sendValidation(reply, [
      {
        loc: ['body'],
        msg: 'Value error, a number is out of the range the service stores',
        type: 'value_error',
      },
    ])
  }
  if (isUnavailable(err)) {
    request.log.error({ err }, 'dependency unavailable')
    return reply.code(503).send({ detail: 'Service temporarily unavailable' })
  }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) return reply.code(status).send({ detail: err.message })
  request.log.error({ err }, 'unhandled error')
  return reply.code(500).send({ detail: 'Internal server error' })
}

function dataOf(request: FastifyRequest, context: string | undefined): unknown {
  switch (context) {
    case 'params':
      return request.params
    case 'querystring':
      return request.query
    case 'headers':
      return request.headers
    default:
      return request.body
  }
}
