import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { TokenResponse } from '../auth/auth.schemas.js'
import { MFA_REQUIRED } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import { type MfaFreshness, mfaFreshness, type ProtectCredentials, protectWithFreshMfa } from './fresh-mfa.js'
import { mfaTokenPair, PASSKEY_REQUIRED } from './mfa.openapi.js'
import { type MfaDeps, setupMfa, verifyMfa } from './mfa.service.js'

export const MFASetupResponse = Type.Object({
  secret: Type.String({ description: 'TOTP secret, base32' }),
  qr_uri: Type.String({ description: 'otpauth:// URI for QR provisioning' }),
})

export const MFAVerifyRequest = Type.Object(
  { code: Type.String({ minLength: 6, maxLength: 6 }) },
  { additionalProperties: false },
)

export const StatusOk = Type.Object({ status: Type.String() })

export interface MfaRoutesDeps extends MfaDeps {
  freshness: MfaFreshness
  protectCredentials: ProtectCredentials
}

export const mfaRoutes: FastifyPluginAsyncTypebox<MfaRoutesDeps> = async (app, deps) => {
  const adminOnly = protect(deps.tokens, { roles: ['admin'] })

  app.post(
    '/admin/mfa/setup',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['mfa'],
        summary: 'Start TOTP enrolment: a new secret, pending until a code from it is verified',
        description:
          'Each call returns a fresh secret and replaces any earlier pending one. An active secret keeps ' +
          'working until a code from the new one is verified at /admin/mfa/verify. While MFA is enabled, ' +
          'only a token with a fresh `mfa_verified_at` may start a re-enrolment: 403 ' +
          '`{"detail", "error": "mfa_required"}` otherwise (a lost authenticator: `wristband admin reset-mfa`).',
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: MFASetupResponse, ...errorResponses(401, 403) },
        doc: {
          operationId: 'startMfaEnrolment',
          returns: 'The new TOTP secret and its URI',
          response: {
            secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
            qr_uri:
              'otpauth://totp/wristband:admin%40example.com?issuer=wristband&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30',
          },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => setupMfa(deps, Number(claimsOf(request).sub), request.ip),
  )

  app.post(
    '/admin/mfa/verify',
    {
      config: perMinute(10),
      ...adminOnly,
      schema: {
        tags: ['mfa'],
        summary: 'Verify a TOTP code; switches MFA on and issues tokens carrying mfa_verified_at',
        description:
          'Accepts a code of the pending secret (which then becomes active) or of the active one, one 30-second ' +
          'step either side of now, never the same code twice. While MFA is enabled, a pending secret counts ' +
          'only from a token with a fresh `mfa_verified_at`; otherwise only the active secret is checked. ' +
          'A wrong or replayed code is 400; after 5 wrong ' +
          'codes the administrator is locked out for a doubling time (429), whatever the client address.',
        security: [{ OAuth2PasswordBearer: [] }],
        body: MFAVerifyRequest,
        response: { 200: TokenResponse, ...errorResponses(400, 401, 403) },
        doc: {
          operationId: 'verifyMfaCode',
          request: { code: '492039' },
          returns: 'MFA is on; tokens carrying mfa_verified_at',
          response: mfaTokenPair,
          errors: { 403: [PASSKEY_REQUIRED] },
        },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const fresh = mfaFreshness(claims, deps.freshness) === 'fresh'
      return verifyMfa(deps, Number(claims.sub), request.body.code, request.ip, fresh)
    },
  )

  app.get(
    '/admin/sensitive/ping',
    {
      config: perMinute(60),
      ...protectWithFreshMfa(deps.tokens, deps.freshness, deps.authEvents, { roles: ['admin'] }),
      schema: {
        tags: ['mfa'],
        summary: 'Answers only to an administrator with a fresh MFA verification',
        description:
          '403 `{"detail", "action": "require_mfa", "reason": "mfa_never" | "mfa_stale"}` when the token has no ' +
          '`mfa_verified_at` or one older than MFA_FRESHNESS_WINDOW_HOURS.',
        security: [{ OAuth2PasswordBearer: [] }],
        response: { 200: StatusOk, ...errorResponses(401, 403) },
        doc: {
          operationId: 'pingSensitive',
          returns: 'The MFA verification is fresh',
          response: { status: 'ok' },
          errors: {
            403: [
              {
                code: 'require_mfa',
                when: '`reason` is `mfa_never` or `mfa_stale`: verify a TOTP code first',
                detail: 'MFA verification is too old; verify again',
                extra: { reason: 'mfa_stale' },
              },
            ],
          },
        },
      },
    },
    async () => ({ status: 'ok' }),
  )
}
