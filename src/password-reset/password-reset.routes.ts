import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { JobRunner } from '../platform/jobs/jobs.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { confirmReset, type PasswordResetDeps, requestReset } from './password-reset.service.js'
import { RESET_MAIL_JOB, type ResetMailDeps, resetMailJob } from './reset-mail.js'
import { RESET_PAGE, RESET_PAGE_CSP } from './reset-page.js'

export const PasswordResetRequestBody = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' }) },
  { additionalProperties: false },
)

export const PasswordResetConfirmBody = Type.Object(
  { new_password: Type.String({ minLength: 8, maxLength: 128 }) },
  { additionalProperties: false },
)

const SENT = { message: 'If the address belongs to an administrator, a reset link is on its way' }

export interface PasswordResetRoutesDeps extends PasswordResetDeps, Omit<ResetMailDeps, 'config'> {
  config: PasswordResetDeps['config'] & ResetMailDeps['config']
  /** The job queue, which sends the reset mail (the feature registers its job here). */
  jobs: JobRunner
}

export const passwordResetRoutes: FastifyPluginAsyncTypebox<PasswordResetRoutesDeps> = async (app, deps) => {
  deps.jobs.register(RESET_MAIL_JOB, resetMailJob(deps))
  app.post(
    '/admin/password-reset/email-send',
    {
      config: perMinute(5),
      schema: {
        tags: ['password-reset'],
        summary: 'E-mail a password-reset link to an administrator',
        description:
          'Always the same 200 body, for an unknown address too and while the mail server is down (the message ' +
          'is queued and retried). 429 when the same address, known or not, was submitted ' +
          'PASSWORD_RESET_HOURLY_QUOTA times in the last hour.',
        body: PasswordResetRequestBody,
        response: { 200: Message, ...errorResponses() },
        doc: {
          operationId: 'sendPasswordResetEmail',
          request: { email: 'admin@example.com' },
          returns: 'Accepted; a link is sent when the address is an administrator (the answer does not tell)',
          response: { message: 'If the address belongs to an administrator, a reset link is on its way' },
        },
      },
    },
    async (request) => {
      await requestReset(deps, request.body.email, request.ip)
      return SENT
    },
  )

  app.post(
    '/admin/password-reset/:token',
    {
      config: perMinute(30),
      schema: {
        tags: ['password-reset'],
        summary: 'Set a new administrator password with the token of a reset link',
        description:
          'Signs the administrator out everywhere (refresh tokens revoked, dashboard sessions ended) and e-mails a ' +
          'notice. Every token that ' +
          'does not work (unknown, expired, used, administrator deleted) gets the same 410.',
        params: Type.Object({ token: Type.String() }),
        body: PasswordResetConfirmBody,
        response: { 200: Message, ...errorResponses(410) },
        doc: {
          operationId: 'resetPassword',
          request: { new_password: 'correct horse battery staple' },
          returns: 'The password is changed',
          response: { message: 'Password changed' },
        },
      },
    },
    async (request) => {
      await confirmReset(deps, request.params.token, request.body.new_password, request.ip)
      return { message: 'Password changed' }
    },
  )

  app.get(
    '/admin/password-reset/:token',
    {
      config: perMinute(30),
      schema: {
        tags: ['password-reset'],
        summary:
          'The page the e-mailed reset link opens (HTML); it posts to POST /admin/password-reset/{token}',
        params: Type.Object({ token: Type.String({ maxLength: 100 }) }),
        response: {
          200: { description: 'HTML page', content: { 'text/html': { schema: Type.String() } } },
        },
        doc: {
          operationId: 'getPasswordResetPage',
          returns: 'The HTML page of the reset link',
        },
      },
    },
    async (_request, reply) =>
      reply
        .header('content-security-policy', RESET_PAGE_CSP)
        .type('text/html; charset=utf-8')
        .send(RESET_PAGE),
  )
}
