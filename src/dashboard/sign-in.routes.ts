import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { BadRequestError, UnauthorizedError } from '../platform/errors.js'
import { CsrfForm, formSession, pageKit, SESSION_COOKIE, sendPage } from './kit/pages.js'
import { PENDING_COOKIE, signInFlow } from './kit/sign-in.js'
import {
  INVALID_SIGN_IN,
  SECOND_STEP_MS,
  type Session,
  type SessionDeps,
  type SignInResult,
  signIn,
  signInWithTotp,
  signOut,
} from './session.service.js'
import { totpStepPage } from './templates.js'

/** The form of the TOTP step. */
const CODE_STEP = '/dashboard/login/code'
const INVALID_CODE = 'Invalid code. Enter the current code from your authenticator app.'

const SignInForm = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    // Optional in the schema so that a missing token is the CSRF refusal (403), not a 422.
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
)

const CodeForm = Type.Object(
  {
    code: Type.String({ pattern: '^[0-9]{6}$' }),
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
)

/** Sign-in with a password, the TOTP step after it, and sign-out (the passkey ways: passkeys.routes.ts). */
export const signInRoutes: FastifyPluginAsyncTypebox<SessionDeps> = async (app, deps) => {
  const kit = pageKit(deps)
  const flow = signInFlow(deps)
  const signInForm = flow.signInForm

  function renderCodeStep(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = flow.csrf(request, reply)
    return sendPage(
      reply,
      totpStepPage({ csrfToken, passkeys: flow.passkeysOn, ...(error ? { error } : {}) }),
      status,
    )
  }
  const codeForm = { render: renderCodeStep, invalid: 'Enter the 6-digit code from your authenticator app.' }

  app.get(
    '/dashboard/login',
    kit.page({
      summary: 'Sign-in page (to the event list when already signed in)',
      statuses: [303],
      session: 'optional',
      formPage: signInForm,
      doc: { operationId: 'getDashboardLoginPage', returns: 'The sign-in page' },
    }),
    async (request, reply) => {
      if (request.dashboardSession) return reply.redirect('/dashboard', 303)
      return flow.renderSignIn(request, reply, 200)
    },
  )

  app.post(
    '/dashboard/login',
    kit.form(
      {
        summary: 'Sign in: opens a session (cookie) and goes to the event list',
        statuses: [401, 403, 422],
        perMinute: 10,
        session: 'none',
        formPage: signInForm,
        doc: {
          operationId: 'dashboardLogin',
          returns:
            'Signed in (to the event list), or, for an administrator whose MFA is on, on to the code step',
        },
      },
      { body: SignInForm },
    ),
    async (request, reply) => {
      if (!flow.csrfMatches(request, request.body.csrf_token))
        return flow.renderSignIn(request, reply, 403, 'The sign-in form has expired. Please try again.')
      let result: SignInResult
      try {
        result = await signIn(deps, request.body, request.ip)
      } catch (err) {
        if (err instanceof UnauthorizedError) return flow.renderSignIn(request, reply, 401, INVALID_SIGN_IN)
        throw err
      }
      if (result.step === 'done') return flow.enterDashboard(request, reply, result.token, result.session)
      // The password was right and the account has a second step: its form, with the sealed sign-in.
      reply.setCookie(PENDING_COOKIE, result.pending, {
        ...flow.cookie(request),
        maxAge: SECOND_STEP_MS / 1000,
      })
      return reply.redirect(result.step === 'passkey' ? '/dashboard/login/passkey' : CODE_STEP, 303)
    },
  )

  app.get(
    CODE_STEP,
    kit.page({
      summary: 'The TOTP step of a sign-in (to sign-in without one waiting)',
      statuses: [303],
      session: 'none',
      formPage: codeForm,
      doc: { operationId: 'getDashboardCodeStepPage', returns: 'The TOTP step page' },
    }),
    async (request, reply) => {
      if (!request.cookies[PENDING_COOKIE]) return reply.redirect('/dashboard/login', 303)
      return renderCodeStep(request, reply, 200)
    },
  )

  app.post(
    CODE_STEP,
    kit.form(
      {
        summary:
          "An administrator's TOTP code after the password: opens the session (the rules of /admin/mfa/verify)",
        statuses: [401, 403, 422],
        perMinute: 10,
        session: 'none',
        formPage: codeForm,
        doc: { operationId: 'dashboardLoginCode', returns: 'Signed in' },
      },
      { body: CodeForm },
    ),
    async (request, reply) => {
      if (!flow.csrfMatches(request, request.body.csrf_token))
        return renderCodeStep(request, reply, 403, 'The form has expired. Please try again.')
      let opened: { token: string; session: Session }
      try {
        opened = await signInWithTotp(deps, request.cookies[PENDING_COOKIE], request.body.code, request.ip)
      } catch (err) {
        if (err instanceof BadRequestError) return renderCodeStep(request, reply, 401, INVALID_CODE)
        if (err instanceof UnauthorizedError) {
          reply.clearCookie(PENDING_COOKIE, { path: '/dashboard/login' })
          return flow.renderSignIn(request, reply, 401, 'The sign-in has expired. Please sign in again.')
        }
        throw err
      }
      return flow.enterDashboard(request, reply, opened.token, opened.session)
    },
  )

  app.post(
    '/dashboard/logout',
    kit.form(
      {
        summary: 'Sign out (needs the session and its CSRF token)',
        statuses: [403, 422],
        doc: { operationId: 'dashboardLogout', returns: 'Signed out' },
      },
      { body: CsrfForm },
    ),
    async (request, reply) => {
      const session = formSession(request, request.body.csrf_token)
      await signOut(deps, session)
      reply.clearCookie(SESSION_COOKIE, { path: '/dashboard' })
      return reply.redirect('/dashboard/login', 303)
    },
  )
}
