/**
 * Domain errors. Domain code throws these; the one error handler (error-handler.ts) turns them into
 * the documented bodies: `{"detail": "..."}` plus the fields in `extra`.
 */
export class AppError extends Error {
  readonly statusCode: number = 500
  readonly extra: Record<string, unknown> = {}
  readonly headers: Record<string, string> = {}
}

export class BadRequestError extends AppError {
  override readonly statusCode = 400
}

/** Every authentication failure; carries `WWW-Authenticate: Bearer`. */
export class UnauthorizedError extends AppError {
  override readonly statusCode = 401
  override readonly headers = { 'www-authenticate': 'Bearer' }
  constructor(message = 'Could not validate credentials') {
    super(message)
  }
}

export class ForbiddenError extends AppError {
  override readonly statusCode = 403
  constructor(
    message = 'Not enough permissions',
    override readonly extra: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

export class NotFoundError extends AppError {
  override readonly statusCode = 404
  constructor(message = 'Not found') {
    super(message)
  }
}

export class ConflictError extends AppError {
  override readonly statusCode = 409
  constructor(
    message: string,
    override readonly extra: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

export class GoneError extends AppError {
  override readonly statusCode = 410
}

export class TooManyRequestsError extends AppError {
  override readonly statusCode = 429
  override readonly extra: Record<string, unknown>
  override readonly headers: Record<string, string>
  constructor(limit: number, retryAfterSeconds: number, message = 'Rate limit exceeded') {
    super(message)
    this.extra = { error: 'rate_limit_exceeded', limit, retry_after: retryAfterSeconds }
    this.headers = { 'retry-after': String(retryAfterSeconds) }
  }
}

/** A dependency the request needs (database, mail, ...) is unreachable; nothing was changed. */
export class ServiceUnavailableError extends AppError {
  override readonly statusCode = 503
  constructor(message = 'Service temporarily unavailable') {
    super(message)
  }
}

/** One entry of a 422 body, in the shape of the original service's HTTPValidationError. */
export interface ValidationIssue {
  loc: (string | number)[]
  msg: string
  type: string
  input?: unknown
  ctx?: Record<string, unknown>
}

/** Validation failure raised by domain code (e.g. a phone number that is not one). */
export class ValidationFailed extends AppError {
  override readonly statusCode = 422
  constructor(readonly issues: ValidationIssue[]) {
    super(issues[0]?.msg ?? 'Validation failed')
  }
}
