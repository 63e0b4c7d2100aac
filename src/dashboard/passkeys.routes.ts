import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { adminMfaEnabled } from '../identities/identities.store.js'
import type { MfaFreshness } from '../mfa/fresh-mfa.js'
import {
  type AuthenticationResponseJSON,
  CHALLENGE_MS,
  finishRegistration,
  hasPasskey,
  passkeysOf,
  policyFor,
  type RegistrationResponseJSON,
  removePasskey,
  startRegistration,
  startSignIn,
} from '../passkeys/passkeys.service.js'
import { AppError, BadRequestError, ForbiddenError, UnauthorizedError } from '../platform/errors.js'
import { creationOptions, requestOptions } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { CsrfForm, formSession, pageKit, sendPage, sessionOf } from './kit/pages.js'
import { PENDING_COOKIE, signInFlow } from './kit/sign-in.js'
import {
  csrfMatches,
  passkeyAccountOf,
  pendingViewer,
  type Session,
  type SessionDeps,
  signInWithPasskey,
} from './session.service.js'
import { passkeyStepPage, passkeysPage } from './templates.js'

export interface PasskeyPagesDeps extends SessionDeps {
  /** How long a second factor counts as fresh: adding or removing a passkey needs one. */
  freshness: MfaFreshness
}

/** The flow token of a ceremony: the challenge is bound to the browser holding it. */
const FLOW_COOKIE = 'wb_passkey_flow'
const SIGN_IN_STEP = '/dashboard/login/passkey'
const MANAGE = '/dashboard/passkeys'
const NOT_ACCEPTED = 'The passkey was not accepted. Try again, or sign in with your password.'
const NEEDS_FRESH =
  'Changing passkeys needs a recent second factor: sign out, then sign in again with your passkey or authenticator code.'

const OptionsAnswer = Type.Object({
  options: Type.Object({}, { additionalProperties: true, description: 'WebAuthn options (JSON form)' }),
})
const jsonSchema = (summary: string, description: string) => ({
  tags: ['dashboard pages'],
  summary,
  description,
  response: {
    200: OptionsAnswer,
    303: {
      description: 'See Other: no session (or the sign-in waiting for its step expired): to sign-in',
      type: 'null',
    },
    ...Object.fromEntries(
      [401, 403, 404, 429].map((s) => [
        s,
        { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      ]),
    ),
  },
})

const AnswerForm = Type.Object(
  {
    response: Type.String({ minLength: 2, maxLength: 32_768 }),
    name: Type.Optional(Type.String({ maxLength: 100 })),
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
    password: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
)
const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) })
const ManageQuery = Type.Object(
  { required: Type.Optional(Type.Literal('1')), added: Type.Optional(Type.Literal('1')) },
  { additionalProperties: false },
)

/**
 * The browser's answer, as the form carries it (JSON text): an object with the fields every answer has,
 * or a 400 before anything reads it; @simplewebauthn/server checks the rest.
 */
function credentialOf<T>(text: string): T {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new BadRequestError('The passkey answer was not understood')
  }
  const v = value as { id?: unknown; type?: unknown; response?: unknown }
  if (typeof v !== 'object' || v === null || typeof v.id !== 'string' || v.id.length > 1400)
    throw new BadRequestError('The passkey answer was not understood')
  if (v.type !== 'public-key' || typeof v.response !== 'object' || v.response === null)
    throw new BadRequestError('The passkey answer was not understood')
  return value as T
}

/**
 * The dashboard's passkey pages: the sign-in step and button (a first factor, or the second
 * after the password), and the account's passkeys page (add, remove). Options are JSON; the browser's
 * answer comes back in a form, so what follows is a page like any other sign-in's.
 */
export const passkeyPageRoutes: FastifyPluginAsyncTypebox<PasskeyPagesDeps> = async (app, deps) => {
  const passkeys = deps.passkeys
  const kit = pageKit(deps)
  const signIn = signInFlow(deps)
  const flowCookie = (request: FastifyRequest, path: string) => ({
    ...signIn.cookie(request),
    path,
    maxAge: CHALLENGE_MS / 1000,
  })

  /**
   * An account with a second factor (TOTP on, or a passkey) changes its passkeys only from a session
   * whose second factor is fresh, so a password alone never adds or removes one. Audited when refused.
   */
  async function requireFreshSecondFactor(request: FastifyRequest, session: Session): Promise<void> {
    const account = passkeyAccountOf(session.viewer)
    const secondFactor =
      (account.kind === 'admin' && (await adminMfaEnabled(deps.db, account.id))) ||
      (await hasPasskey(passkeys, account))
    if (!secondFactor) return
    const windowMs = deps.freshness.windowHours * 3_600_000
    if (session.mfaVerifiedAt !== null && deps.clock.now() - session.mfaVerifiedAt <= windowMs) return
    await deps.audit.record({
      kind: 'mfa_required',
      actor: `${account.kind}:${account.id}`,
      ip: request.ip,
      outcome: 'denied',
      detail: { route: `${request.method} ${request.routeOptions.url}` },
    })
    throw new ForbiddenError(NEEDS_FRESH, 'mfa_required')
  }

  function renderStep(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = signIn.csrf(request, reply)
    return sendPage(reply, passkeyStepPage({ csrfToken, ...(error ? { error } : {}) }), status)
  }

  async function renderManage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    message: { notice?: string; error?: string } = {},
  ) {
    const session = sessionOf(request)
    const account = passkeyAccountOf(session.viewer)
    const list = await passkeysOf(passkeys, account)
    const required = (await policyFor(passkeys, account)) === 'register'
    const notice =
      message.notice ??
      (required
        ? 'Your account must sign in with a passkey (PASSKEYS_REQUIRED_FOR): add one now.'
        : undefined)
    return sendPage(
      reply,
      passkeysPage(session, list, {
        available: passkeys.relyingParty !== undefined,
        ...(notice ? { notice } : {}),
        ...(message.error ? { error: message.error } : {}),
      }),
      status,
    )
  }

  app.get(
    SIGN_IN_STEP,
    kit.page({
      summary: 'The passkey step of a sign-in (to sign-in without one waiting)',
      statuses: [303],
      session: 'none',
      doc: {
        operationId: 'getDashboardPasskeyStepPage',
        returns: 'The passkey step page',
      },
    }),
    async (request, reply) => {
      if (!request.cookies[PENDING_COOKIE]) return reply.redirect('/dashboard/login', 303)
      return renderStep(request, reply, 200)
    },
  )

  app.post(
    `${SIGN_IN_STEP}/options`,
    {
      // As often as the sign-in page itself, which asks for options as it loads (conditional UI); the
      // attempts are the answers, limited as password sign-ins are.
      config: perMinute(120),
      schema: {
        ...jsonSchema(
          'Passkey sign-in options for the sign-in page (JSON; the flow in a cookie)',
          "Needs the sign-in form's CSRF token in `x-csrf-token`. After the password (a sign-in waiting for its " +
            'second step) the challenge is bound to that account; otherwise it is a password-less first factor.',
        ),
        doc: {
          operationId: 'dashboardPasskeySignInOptions',
          returns: 'WebAuthn request options; the flow is in a cookie',
          response: { options: requestOptions },
        },
      },
    },
    async (request, reply) => {
      const given = request.headers['x-csrf-token']
      if (!signIn.csrfMatches(request, typeof given === 'string' ? given : undefined))
        throw new ForbiddenError('CSRF token missing or wrong')
      const pending = request.cookies[PENDING_COOKIE]
      const viewer = pending ? await pendingViewer(deps, pending) : null
      const { flow, options } = await startSignIn(passkeys, viewer && { kind: viewer.kind, id: viewer.id })
      reply.setCookie(FLOW_COOKIE, flow, flowCookie(request, '/dashboard/login'))
      reply.header('cache-control', 'no-store')
      return { options }
    },
  )

  app.post(
    SIGN_IN_STEP,
    kit.form(
      {
        summary:
          "Sign in with a passkey: the browser's answer; opens the session (first factor, or after the password)",
        statuses: [400, 401, 403, 422],
        perMinute: 10,
        session: 'none',
        doc: { operationId: 'dashboardLoginPasskey', returns: 'Signed in' },
      },
      { body: AnswerForm },
    ),
    async (request, reply) => {
      const pending = request.cookies[PENDING_COOKIE]
      const again = (status: number, error: string) =>
        pending
          ? renderStep(request, reply, status, error)
          : signIn.renderSignIn(request, reply, status, error)
      if (!signIn.csrfMatches(request, request.body.csrf_token))
        return again(403, 'The sign-in form has expired. Please try again.')
      const flow = request.cookies[FLOW_COOKIE]
      reply.clearCookie(FLOW_COOKIE, { path: '/dashboard/login' })
      let opened: Awaited<ReturnType<typeof signInWithPasskey>>
      try {
        const response = credentialOf<AuthenticationResponseJSON>(request.body.response)
        opened = await signInWithPasskey(deps, { pending, flow, response }, request.ip)
      } catch (err) {
        if (err instanceof BadRequestError) return again(400, NOT_ACCEPTED)
        if (err instanceof UnauthorizedError) return again(401, NOT_ACCEPTED)
        throw err
      }
      return signIn.enterDashboard(request, reply, opened.token, opened.session)
    },
  )

  app.get(
    MANAGE,
    kit.page(
      {
        summary: "The signed-in account's passkeys (to sign-in without a session)",
        doc: {
          operationId: 'getDashboardPasskeysPage',
          returns: "The account's passkeys page",
        },
      },
      { querystring: ManageQuery },
    ),
    async (request, reply) =>
      renderManage(request, reply, 200, request.query.added ? { notice: 'The passkey was added.' } : {}),
  )

  app.post(
    `${MANAGE}/options`,
    {
      config: perMinute(30),
      preParsing: kit.requireSession,
      schema: {
        ...jsonSchema(
          'Passkey registration options for the signed-in account (JSON; the flow in a cookie)',
          "Needs the session's CSRF token in `x-csrf-token`, and a fresh second factor when the account has one.",
        ),
        doc: {
          operationId: 'dashboardPasskeyRegistrationOptions',
          returns: 'WebAuthn creation options; the flow is in a cookie',
          response: { options: creationOptions },
        },
      },
    },
    async (request, reply) => {
      const session = sessionOf(request)
      const given = request.headers['x-csrf-token']
      if (!csrfMatches(session, typeof given === 'string' ? given : undefined))
        throw new ForbiddenError('CSRF token missing or wrong')
      await requireFreshSecondFactor(request, session)
      const { flow, options } = await startRegistration(passkeys, passkeyAccountOf(session.viewer))
      reply.setCookie(FLOW_COOKIE, flow, flowCookie(request, MANAGE))
      reply.header('cache-control', 'no-store')
      return { options }
    },
  )

  app.post(
    MANAGE,
    kit.form(
      {
        summary: "Add a passkey: the browser's answer to the registration options",
        statuses: [400, 403, 409, 422],
        doc: {
          operationId: 'dashboardAddPasskey',
          returns: 'Added: back to the passkeys page',
        },
      },
      { body: AnswerForm },
    ),
    async (request, reply) => {
      const session = formSession(request, request.body.csrf_token)
      const flow = request.cookies[FLOW_COOKIE]
      reply.clearCookie(FLOW_COOKIE, { path: MANAGE })
      try {
        await requireFreshSecondFactor(request, session)
        const response = credentialOf<RegistrationResponseJSON>(request.body.response)
        await finishRegistration(
          passkeys,
          passkeyAccountOf(session.viewer),
          { flow, response, name: request.body.name, password: request.body.password || undefined },
          request.ip,
        )
      } catch (err) {
        if (err instanceof AppError && [400, 403, 409].includes(err.statusCode))
          return renderManage(request, reply, err.statusCode, {
            error: err.statusCode === 403 ? NEEDS_FRESH : `The passkey was not added: ${err.message}.`,
          })
        throw err
      }
      return reply.redirect(`${MANAGE}?added=1`, 303)
    },
  )

  app.post(
    `${MANAGE}/:id/delete`,
    kit.form(
      {
        summary: "Remove one of the signed-in account's passkeys",
        statuses: [403, 404, 422],
        doc: {
          operationId: 'dashboardRemovePasskey',
          returns: 'Removed: back to the passkeys page',
        },
      },
      { params: IdParams, body: CsrfForm },
    ),
    async (request, reply) => {
      const session = formSession(request, request.body.csrf_token)
      try {
        await requireFreshSecondFactor(request, session)
      } catch (err) {
        if (err instanceof ForbiddenError) return renderManage(request, reply, 403, { error: NEEDS_FRESH })
        throw err
      }
      await removePasskey(passkeys, passkeyAccountOf(session.viewer), request.params.id, request.ip)
      return reply.redirect(MANAGE, 303)
    },
  )
}
