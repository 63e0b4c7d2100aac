import type { components } from './generated/openapi.js'

type ValidationIssue = components['schemas']['HTTPValidationError']['detail'][number]

/**
 * An answer of the partner API other than a success. `code` is the body's `error` field (for
 * example `duplicate_company_ticket_id`, `idempotency_key_in_use`, `webhook_disabled`), listed per
 * operation and status in the OpenAPI document; `detail` is the human message.
 */
export class PartnerApiError extends Error {
  override readonly name: string = 'PartnerApiError'
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly code: string | undefined,
    readonly body: unknown,
    readonly response: Response,
  ) {
    super(`${status}${code ? ` ${code}` : ''}: ${detail}`)
  }
}

/** 401: the API key is missing, unknown or revoked. */
export class AuthenticationError extends PartnerApiError {
  override readonly name = 'AuthenticationError'
}
/** 403: the key lacks the scope (api:read / api:write) or names another event. */
export class PermissionError extends PartnerApiError {
  override readonly name = 'PermissionError'
}
export class NotFoundError extends PartnerApiError {
  override readonly name = 'NotFoundError'
}
/** 409: see `code`. */
export class ConflictError extends PartnerApiError {
  override readonly name = 'ConflictError'
}
/** 422: the request does not match the schema; `issues` says where (`loc`) and why (`msg`). */
export class ValidationError extends PartnerApiError {
  override readonly name = 'ValidationError'
  get issues(): ValidationIssue[] {
    return (this.body as { detail: ValidationIssue[] }).detail
  }
}
/** 429 after the client's retries (or on a call that is not retried). */
export class RateLimitedError extends PartnerApiError {
  override readonly name = 'RateLimitedError'
  get retryAfterSeconds(): number | undefined {
    const v = Number(this.response.headers.get('retry-after'))
    return Number.isFinite(v) && v > 0 ? v : undefined
  }
}

const BY_STATUS: Record<number, typeof PartnerApiError> = {
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  422: ValidationError,
  429: RateLimitedError,
}

/** The typed error of a failed answer. */
export function toPartnerApiError(body: unknown, response: Response): PartnerApiError {
  const b = (typeof body === 'object' && body !== null ? body : {}) as { detail?: unknown; error?: unknown }
  const detail =
    typeof b.detail === 'string'
      ? b.detail
      : Array.isArray(b.detail)
        ? b.detail.map((i: { msg?: string }) => i.msg).join('; ')
        : response.statusText || 'Request failed'
  const code = typeof b.error === 'string' ? b.error : undefined
  const Class = BY_STATUS[response.status] ?? PartnerApiError
  return new Class(response.status, detail, code, body, response)
}

/**
 * The data of a call, or its typed error thrown:
 * `const ticket = await unwrap(client.POST('/companies/ticket', { body }))`.
 */
export async function unwrap<R extends { data?: unknown; error?: unknown; response: Response }>(
  call: Promise<R>,
): Promise<Exclude<R['data'], undefined>> {
  const { data, error, response } = await call
  if (!response.ok) throw toPartnerApiError(error, response)
  return data as Exclude<R['data'], undefined>
}
