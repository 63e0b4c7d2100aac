/**
 * The shape of what the OpenAPI document says about each operation beyond the rest of its route schema:
 * the operationId (the name a generated client gives the call), what a success answers, examples, and
 * the `error` codes an error status can carry. Each route gives its own in its schema's `doc`, beside
 * its summary and description; `finishDocument` (openapi.ts) writes them into the document, and
 * src/platform/openapi.test.ts checks every operation has them. What is not one operation's (tag
 * descriptions, path-parameter examples, the `webhooks` the service sends) is a feature's
 * `FeatureOpenApi` in `src/<feature>/<feature>.openapi.ts`, listed in `src/openapi.ts`.
 */
import type { SentErrorCode } from './errors.js'

export interface OperationDoc {
  operationId: string
  /** What the success answer is (its response description). */
  returns: string
  /** An example request body. */
  request?: unknown
  /** The body may be left out altogether (the route reads it as `{}`). */
  bodyOptional?: boolean
  /** An example success answer. */
  response?: unknown
  /** For an error status: each `error` code it can carry, with when, and an example `detail`. */
  errors?: Record<number, ErrorCase[]>
}

/** One cause of an error status: its code (from ERROR_CODES, which also gives the body field). */
export interface ErrorCase {
  code: SentErrorCode
  when: string
  detail: string
  /** Other fields of the body. */
  extra?: Record<string, unknown>
}

declare module 'fastify' {
  interface FastifySchema {
    /** The operation's texts in the OpenAPI document (never read by validation). */
    doc?: OperationDoc
  }
}

/** One feature's part of the document: merged by `finishDocument`; a key given by two features is an error. */
export interface FeatureOpenApi {
  /** The descriptions of the tags its operations carry. */
  tags?: Record<string, string>
  /** Examples of path parameters, by name: every operation with a parameter of that name shows it. */
  params?: Record<string, string>
  /** OpenAPI 3.1 `webhooks`: the requests it sends (not paths it serves). */
  webhooks?: Record<string, unknown>
}
