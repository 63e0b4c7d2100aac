import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import {
  AppError,
  BadRequestError,
  errorBody,
  InternalError,
  NotFoundError,
  PayloadTooLargeError,
  ServiceUnavailableError,
  UnsupportedMediaTypeError,
  ValidationFailed,
  type ValidationIssue,
} from './errors.js'
import { storageProblem } from './storage.js'
import { toValidationIssues } from './validation.js'

function sendValidation(reply: FastifyReply, issues: ValidationIssue[]) {
  return sendError(reply, new ValidationFailed(issues))
}

/** Sends an error's documented answer: its status, its headers and `errorBody`. */
export function sendError(reply: FastifyReply, err: AppError) {
  return reply.code(err.statusCode).headers(err.headers).send(errorBody(err))
}

/**
 * A dependency's failure rather than the request's: the database unreachable, or storage that takes
 * no writes (read-only, disk full). Answered 503; nothing was changed.
 */
export function isDependencyFailure(err: unknown): boolean {
  return isUnavailable(err) || storageProblem(err) !== undefined
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
    // Connection exceptions; PgBouncer sends its own failures as 08P01 (a server it cannot log in to,
    // query_wait_timeout: no server connection came free in time).
    code?.startsWith('08') === true ||
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
  app.setNotFoundHandler((_request, reply) => sendError(reply, new NotFoundError('Not Found')))
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
  if (err instanceof AppError) {
    if (err.statusCode >= 500) request.log.warn({ err }, 'dependency unavailable')
    return sendError(reply, err)
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return sendValidation(reply, [
        { loc: ['body'], msg: 'JSON decode error', type: 'json_invalid', ctx: { error: err.message } },
      ])
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return sendError(reply, new PayloadTooLargeError())
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return sendError(reply, new UnsupportedMediaTypeError())
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return sendError(reply, new BadRequestError('Invalid Content-Length'))
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
    return sendError(reply, new ServiceUnavailableError())
  }
  // Storage that takes no writes was announced once, naming its path (ops/storage-health.ts): one
  // line per outage, not one per refused request.
  if (storageProblem(err) !== undefined) {
    request.log.debug({ err }, 'storage unavailable')
    return sendError(reply, new ServiceUnavailableError())
  }
  const status = err.statusCode ?? 500
  // Any other error the framework raises about the request keeps its 4xx status and message.
  if (status >= 400 && status < 500) return reply.code(status).send({ detail: err.message })
  request.log.error({ err }, 'unhandled error')
  return sendError(reply, new InternalError())
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
