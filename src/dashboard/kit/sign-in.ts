import type { FastifyReply, FastifyRequest } from 'fastify'
import { policyFor } from '../../passkeys/passkeys.service.js'
import { safeEqual } from '../../platform/digest.js'
import { randomToken } from '../../platform/random.js'
import { passkeyAccountOf, SESSION_MAX_MS, type Session, type SessionDeps } from '../session.service.js'
import { signInPage } from '../templates.js'
import { type FormPage, SESSION_COOKIE, sendPage } from './pages.js'

const LOGIN_CSRF_COOKIE = 'wb_login_csrf'
/** The sign-in waiting for its second step (sealed; see session.service.ts). */
export const PENDING_COOKIE = 'wb_login_pending'

/**
 * What every sign-in form shares (the password form, the TOTP step, the passkey step and button): the
 * double-submit CSRF token of the forms before a session, the sign-in's cookies, the sign-in page, and
 * entering the dashboard once signed in.
 */
export function signInFlow(deps: SessionDeps) {
  /** Passkeys are offered only where they work: with an RP ID (WEBAUTHN_RP_ID in production). */
  const passkeysOn = deps.passkeys.relyingParty !== undefined

  /** The cookies of a sign-in under way (the CSRF token, the waiting sign-in, the passkey flow). */
  const cookie = (request: FastifyRequest) =>
    ({
      path: '/dashboard/login',
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
    }) as const

  /** A fresh double-submit token for a sign-in form: the cookie now, the form field in the page. */
  function csrf(request: FastifyRequest, reply: FastifyReply): string {
    const csrfToken = randomToken(32)
    reply.setCookie(LOGIN_CSRF_COOKIE, csrfToken, { ...cookie(request), maxAge: 60 * 60 })
    return csrfToken
  }

  /** Double-submit check: a sign-in form posted from another site cannot know the cookie's value. */
  function csrfMatches(request: FastifyRequest, given: string | undefined): boolean {
    const expected = request.cookies[LOGIN_CSRF_COOKIE]
    return Boolean(expected && given && safeEqual(expected, given))
  }

  /** The sign-in page again, with the username given and what went wrong. */
  function renderSignIn(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = csrf(request, reply)
    const body = request.body as { username?: unknown } | undefined
    const username = typeof body?.username === 'string' ? body.username : undefined
    return sendPage(
      reply,
      signInPage({
        csrfToken,
        passkeys: passkeysOn,
        ...(username ? { username } : {}),
        ...(error ? { error } : {}),
      }),
      status,
    )
  }

  /**
   * Signed in: the session cookie, the sign-in's cookies gone, on to the event list, or to the passkeys
   * page when PASSKEYS_REQUIRED_FOR asks the account to register one.
   */
  async function enterDashboard(
    request: FastifyRequest,
    reply: FastifyReply,
    token: string,
    session: Session,
  ) {
    reply.clearCookie(LOGIN_CSRF_COOKIE, { path: '/dashboard/login' })
    reply.clearCookie(PENDING_COOKIE, { path: '/dashboard/login' })
    reply.setCookie(SESSION_COOKIE, token, {
      path: '/dashboard',
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
      maxAge: SESSION_MAX_MS / 1000,
    })
    const policy = await policyFor(deps.passkeys, passkeyAccountOf(session.viewer))
    return reply.redirect(policy === 'register' ? '/dashboard/passkeys?required=1' : '/dashboard', 303)
  }

  /** The sign-in page as the form page of its routes. */
  const signInForm: FormPage = { render: renderSignIn, invalid: 'Enter your username and password.' }

  return { passkeysOn, cookie, csrf, csrfMatches, renderSignIn, enterDashboard, signInForm }
}
