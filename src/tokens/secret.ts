import fs from 'node:fs'
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../platform/config.js'
import { randomToken } from '../platform/random.js'

/**
 * The signing secret: JWT_SECRET when set; otherwise (never in production, config refuses that) one
 * generated on first start into DATA_DIR/jwt-secret with mode 0600, with a warning.
 */
export function resolveSigningSecret(config: Config, log: Pick<FastifyBaseLogger, 'warn'>): string {
  if (config.JWT_SECRET) return config.JWT_SECRET
  const file = path.join(config.DATA_DIR, 'jwt-secret')
  let secret: string
  try {
    secret = fs.readFileSync(file, 'utf8').trim()
  } catch {
    fs.mkdirSync(config.DATA_DIR, { recursive: true })
    secret = randomToken(48)
    try {
      fs.writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: 'wx' })
    } catch {
      // Another instance wrote it first: use theirs.
      secret = fs.readFileSync(file, 'utf8').trim()
    }
  }
  log.warn(
    { file },
    'JWT_SECRET is not set: using a generated development secret; set JWT_SECRET (at least 32 bytes) in production',
  )
  return secret
}
