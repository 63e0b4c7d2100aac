import type { FastifyReply, FastifyRequest, preParsingAsyncHookHandler } from 'fastify'
import { type TSchema, Type } from 'typebox'
import { ForbiddenError, UnauthorizedError } from '../../platform/errors.js'
import type { OperationDoc } from '../../platform/openapi-operations.js'
import { perMinute } from '../../platform/rate-limit.js'
import { csrfMatches, resumeSession, type Session, type SessionDeps } from '../session.service.js'
import { EventIdParams } from '../stats.schemas.js'
import type { Viewer } from '../viewers.js'

/** The dashboard's session cookie (path /dashboard). */
export const SESSION_COOKIE = 'wb_session'

/** A form page that answers its own refusals (too many attempts, a form its schema refuses) with itself. */
export interface FormPage {
  render(request: FastifyRequest, reply: FastifyReply, status: number, error: string): FastifyReply
  /** What the page says of a form its schema refused. */
  invalid: string
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard session of the request, set on session routes. */
    dashboardSession: Session | null
  }
  interface FastifyContextConfig {
    /** Set on the sign-in forms: the page context's error handler answers with the form itself. */
    formPage?: FormPage
  }
}

/**
 * Reads the session cookie; `required` routes answer 401 (JSON) or go to sign-in (pages) without one.
 * A preParsing hook, like protect(): after the rate limit (onRequest), before body validation.
 */
export function loadSession(deps: SessionDeps, required: boolean): preParsingAsyncHookHandler {
  return async (request, _reply, payload) => {
    const token = request.cookies[SESSION_COOKIE]
    request.dashboardSession = token ? await resumeSession(deps, token) : null
    if (required && !request.dashboardSession) throw new UnauthorizedError('Not signed in')
    return payload
  }
}

/**
 * The request's session (routes behind the session hook), refused (403) when `may` says its viewer
 * may not see the page.
 */
export function sessionOf(request: FastifyRequest, may?: (viewer: Viewer) => boolean): Session {
  const session = request.dashboardSession
  if (!session) throw new UnauthorizedError('Not signed in')
  if (may && !may(session.viewer)) throw new ForbiddenError()
  return session
}

/**
 * A form's session: the session's own CSRF token must come back with the form (a form posted from
 * another site cannot know it), and `may` must let its viewer act; 403 otherwise.
 */
export function formSession(
  request: FastifyRequest,
  given: string | undefined,
  may?: (viewer: Viewer) => boolean,
): Session {
  const session = sessionOf(request)
  if (!csrfMatches(session, given) || (may && !may(session.viewer)))
    throw new ForbiddenError('CSRF token missing or wrong, or no access')
  return session
}

/** The form of a button behind the session: its CSRF token only (optional, so that a missing one is 403). */
export const CsrfForm = Type.Object(
  { csrf_token: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
)

/** Answers a page. */
export function sendPage(reply: FastifyReply, page: string, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page)
}

/** Pages answer HTML; `statuses` are the pages a route may answer besides its success. */
export function pageSchema(summary: string, success: 200 | 303, ...statuses: number[]) {
  return {
    tags: ['dashboard pages'],
    summary,
    // A page that validates its input: a form refused by its schema is 400, a path or query value 422.
    response: Object.fromEntries(
      [success, ...statuses, ...(statuses.includes(422) ? [400] : []), 429].map((status) => [
        status,
        status === 303
          ? { description: 'See Other: the page to go to next (Location)', type: 'null' }
          : { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      ]),
    ),
  }
}

/** What a page route says of itself; the rest of its options the kit derives. */
export interface PageRoute {
  summary: string
  /** The pages the route may answer besides its success (a 303 to sign-in, 403, 404, 422…). */
  statuses?: number[]
  /** Requests a minute per address: 120 for a page, 30 for a form unless given. */
  perMinute?: number
  /**
   * The session: `required` (the default) reads it and sends a request without one to sign-in,
   * `optional` reads it, `none` does not (the sign-in forms, before there is one).
   */
  session?: 'required' | 'optional' | 'none'
  /** The sign-in forms answer their own refusals. */
  formPage?: FormPage
  /** The route's texts in the OpenAPI document (its operationId, what it answers). */
  doc?: OperationDoc
}

/** The inputs of a route, each checked by its schema. */
interface Inputs {
  params?: TSchema
  querystring?: TSchema
  body?: TSchema
}

/**
 * The dashboard's way to declare a page: the rate limit, the session hook and the schema (summary,
 * the HTML answers, the inputs) from a few words, so that every page route has them the same way.
 * Each page plugin builds its kit from its deps: `const kit = pageKit(deps)`.
 */
export function pageKit(deps: SessionDeps) {
  const hooks = { required: loadSession(deps, true), optional: loadSession(deps, false) }
  const options = <S extends Inputs>(route: PageRoute, success: 200 | 303, rate: number, inputs: S) => {
    const session = route.session ?? 'required'
    // Without a session, a page that needs one goes to sign-in (303).
    const statuses = [...(session === 'required' ? [303] : []), ...(route.statuses ?? [])]
    return {
      config: {
        ...perMinute(route.perMinute ?? rate),
        ...(route.formPage ? { formPage: route.formPage } : {}),
      },
      ...(session === 'none' ? {} : { preParsing: hooks[session] }),
      schema: {
        ...pageSchema(route.summary, success, ...statuses),
        ...inputs,
        ...(route.doc ? { doc: route.doc } : {}),
      },
    }
  }
  return {
    /** The session hook of a route the kit does not declare (the passkey pages' JSON). */
    requireSession: hooks.required,
    /** A page (GET): HTML. */
    page<S extends Inputs = Record<never, never>>(route: PageRoute, inputs?: S) {
      return options(route, 200, 120, inputs ?? ({} as S))
    },
    /**
     * A page of one event (`/dashboard/events/:event_id…`): besides sign-in, it may answer 403 (the
     * viewer may not see the event), 404 (no such event) and 422 (an id that is no integer).
     */
    eventPage<S extends Omit<Inputs, 'params'> = Record<never, never>>(route: PageRoute, inputs?: S) {
      const statuses = [403, 404, 422, ...(route.statuses ?? [])]
      return options({ ...route, statuses }, 200, 120, { params: EventIdParams, ...(inputs ?? ({} as S)) })
    },
    /** A form (POST, url-encoded): answers 303 on to the next page, or a page of its refusal. */
    form<S extends Inputs & { body: TSchema }>(route: PageRoute, inputs: S) {
      const declared = options(route, 303, 30, inputs)
      return { ...declared, schema: { ...declared.schema, consumes: ['application/x-www-form-urlencoded'] } }
    },
  }
}
