/**
 * Every stable error code, the one list. An error's code fixes its status. Most codes only name the
 * error in code (the status says it all, so the body is `{"detail": "..."}`); those with a `field`
 * tell apart causes of one status and are sent in the body under that field, `when` saying which.
 * The OpenAPI document lists the sent codes (an enum on ErrorBody, and per operation in its
 * route's `doc`, whose `ErrorCase` may name only these).
 */
export const ERROR_CODES = {
  bad_request: { status: 400 },
  unauthorized: { status: 401 },
  forbidden: { status: 403 },
  not_found: { status: 404 },
  conflict: { status: 409 },
  gone: { status: 410 },
  payload_too_large: { status: 413 },
  unsupported_media_type: { status: 415 },
  validation_failed: { status: 422 },
  internal_error: { status: 500 },
  service_unavailable: { status: 503 },

  rate_limit_exceeded: {
    status: 429,
    field: 'error',
    when: 'too many requests from this address or key in the window',
  },
  require_mfa: {
    status: 403,
    field: 'action',
    when: 'the route needs a fresh MFA verification; `reason` is `mfa_never` or `mfa_stale`',
  },
  mfa_required: {
    status: 403,
    field: 'error',
    when: "the administrator's MFA is on: creating lasting credentials or replacing the authenticator needs a fresh MFA verification",
  },
  full_sync_too_large: {
    status: 413,
    field: 'error',
    when: 'a first sync of the object form for an event above SCAN_SYNC_JSON_MAX_TICKETS tickets: take the compact form (`format=columns`)',
  },
  device_key_required: {
    status: 403,
    field: 'error',
    when: "a device signed in without a device key (DEVICE_KEYS_REQUIRED=false) neither downloads the event's codes nor uploads scans",
  },
  passkey_required: {
    status: 403,
    field: 'error',
    when: 'PASSKEYS_REQUIRED_FOR: the administrator has a passkey and must sign in with it, not with a TOTP code',
  },
  invalid_request: {
    status: 400,
    field: 'error',
    when: 'an OAuth request (RFC 6749 section 5.2) lacks a required parameter, repeats one or gives one a bad value',
  },
  username_taken: { status: 409, field: 'error', when: 'the dashboard username exists' },
  already_used: { status: 409, field: 'error', when: 'the ticket was used; `used_timestamp` tells when' },
  product: {
    status: 409,
    field: 'error',
    when: "a scan's ticket type is not on the check-in list (`reason` says the same)",
  },
  invalid_time: {
    status: 409,
    field: 'error',
    when: 'a scan is outside the check-in list’s windows (`reason` says the same)',
  },
  wrong_event: {
    status: 409,
    field: 'error',
    when: 'the ticket is of another event than the check-in list named (`reason` says the same)',
  },
  concurrent_change: {
    status: 409,
    field: 'error',
    when: 'the ticket was used or re-issued while the request ran',
  },
  duplicate_company_ticket_id: {
    status: 409,
    field: 'error',
    when: 'the company_ticket_id was already used in the event',
  },
  idempotency_key_in_use: {
    status: 409,
    field: 'error',
    when: 'a request with the same Idempotency-Key is still being processed',
  },
  webhook_disabled: { status: 409, field: 'error', when: 'the event has no enabled webhook receiver' },
  already_claimed: { status: 409, field: 'error', when: 'another consumer claimed the link' },
  invalid_token: {
    status: 401,
    field: 'error',
    when: 'GET /tokens/check: the bearer token given is malformed, expired, revoked, unknown or of a type the check does not allow; POST /oauth2/introspect: the credential given is no verify credential (also in `WWW-Authenticate`)',
  },
  insufficient_scope: {
    status: 403,
    field: 'error',
    when: "GET /tokens/check: the token is good but not the check's requirement (role, event, scope; also in `WWW-Authenticate`)",
  },
} as const satisfies Record<string, { status: number; field?: 'error' | 'action'; when?: string }>

export type ErrorCode = keyof typeof ERROR_CODES

/** The codes of one status, so an error class takes only codes that answer its status. */
type CodeFor<S extends number> = {
  [C in ErrorCode]: (typeof ERROR_CODES)[C]['status'] extends S ? C : never
}[ErrorCode]

/** The codes an answer carries in its body. */
export type SentErrorCode = {
  [C in ErrorCode]: (typeof ERROR_CODES)[C] extends { field: string } ? C : never
}[ErrorCode]

/** The body field a code is sent in; undefined for a code the answer leaves out. */
export function bodyFieldOf(code: ErrorCode): 'error' | 'action' | undefined {
  const spec = ERROR_CODES[code]
  return 'field' in spec ? spec.field : undefined
}

/** The codes an answer carries, with the body field each goes in. */
export const SENT_ERROR_CODES = Object.entries(ERROR_CODES).flatMap(([code, v]) =>
  'field' in v ? [{ code: code as SentErrorCode, field: v.field, when: v.when }] : [],
)

/**
 * Domain errors. Domain code throws these; the one error handler (error-handler.ts) turns them into
 * the documented bodies (`errorBody`).
 */
export abstract class AppError extends Error {
  readonly statusCode: number
  readonly extra: Record<string, unknown> = {}
  readonly headers: Record<string, string> = {}
  // A private field behind a getter, so the code stays out of the logged error's fields.
  readonly #code: ErrorCode
  constructor(message: string, code: ErrorCode) {
    super(message)
    this.statusCode = ERROR_CODES[code].status
    this.#code = code
  }
  get code(): ErrorCode {
    return this.#code
  }
}

export class BadRequestError extends AppError {
  constructor(message: string) {
    super(message, 'bad_request')
  }
}

/**
 * A malformed request to an OAuth endpoint (RFC 6749 section 5.2, which RFC 7009 and RFC 7662 take):
 * 400 `invalid_request` with `error_description`, which OAuth clients read, besides `detail`.
 */
export class InvalidOAuthRequestError extends AppError {
  override readonly extra: Record<string, unknown>
  constructor(message: string) {
    super(message, 'invalid_request')
    this.extra = { error_description: message }
  }
}

/**
 * Every authentication failure; carries `WWW-Authenticate: Bearer`, with the RFC 6750 error where the
 * code is one (`invalid_token`: a token was given and is not good).
 */
export class UnauthorizedError extends AppError {
  override readonly headers: Record<string, string>
  constructor(message = 'Could not validate credentials', code: CodeFor<401> = 'unauthorized') {
    super(message, code)
    this.headers = { 'www-authenticate': bearerChallenge(code) }
  }
}

export class ForbiddenError extends AppError {
  override readonly headers: Record<string, string>
  constructor(
    message = 'Not enough permissions',
    code: CodeFor<403> = 'forbidden',
    override readonly extra: Record<string, unknown> = {},
  ) {
    super(message, code)
    // RFC 6750: a bearer token that lacks what the resource requires.
    this.headers = code === 'insufficient_scope' ? { 'www-authenticate': bearerChallenge(code) } : {}
  }
}

/** The `WWW-Authenticate` value of a bearer refusal: the RFC 6750 error code where there is one. */
function bearerChallenge(code: ErrorCode): string {
  return code === 'invalid_token' || code === 'insufficient_scope' ? `Bearer error="${code}"` : 'Bearer'
}

export class NotFoundError extends AppError {
  constructor(message = 'Not found') {
    super(message, 'not_found')
  }
}

export class ConflictError extends AppError {
  constructor(
    message: string,
    code: CodeFor<409> = 'conflict',
    override readonly extra: Record<string, unknown> = {},
  ) {
    super(message, code)
  }
}

export class GoneError extends AppError {
  constructor(message: string) {
    super(message, 'gone')
  }
}

/** A body over BODY_LIMIT_BYTES (raised by the framework's parser), or an answer too large to give in the form asked for. */
export class PayloadTooLargeError extends AppError {
  constructor(message = 'Request body too large', code: CodeFor<413> = 'payload_too_large') {
    super(message, code)
  }
}

/** A body that is not JSON (raised by the framework's parser). */
export class UnsupportedMediaTypeError extends AppError {
  constructor() {
    super('Unsupported media type: send application/json', 'unsupported_media_type')
  }
}

export class TooManyRequestsError extends AppError {
  override readonly extra: Record<string, unknown>
  override readonly headers: Record<string, string>
  constructor(limit: number, retryAfterSeconds: number, message = 'Rate limit exceeded') {
    super(message, 'rate_limit_exceeded')
    this.extra = { limit, retry_after: retryAfterSeconds }
    this.headers = { 'retry-after': String(retryAfterSeconds) }
  }
}

/** A fault of the service itself; the answer says nothing more. */
export class InternalError extends AppError {
  constructor() {
    super('Internal server error', 'internal_error')
  }
}

/** A dependency the request needs (database, mail, ...) is unreachable; nothing was changed. */
export class ServiceUnavailableError extends AppError {
  constructor(message = 'Service temporarily unavailable') {
    super(message, 'service_unavailable')
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
  constructor(readonly issues: ValidationIssue[]) {
    super(issues[0]?.msg ?? 'Validation failed', 'validation_failed')
  }
}

/**
 * The JSON body of an error answer, the one place it is built: `{"detail": [...issues]}` for a 422,
 * else `{"detail": "<message>"}`, then the code under its field where the code is sent, then the
 * error's other fields.
 */
export function errorBody(err: AppError): Record<string, unknown> {
  if (err instanceof ValidationFailed) return { detail: err.issues }
  const field = bodyFieldOf(err.code)
  return { detail: err.message, ...(field ? { [field]: err.code } : {}), ...err.extra }
}
