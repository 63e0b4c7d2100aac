import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { calculateJwkThumbprint, type JWK } from 'jose'
import type { Config } from '../platform/config.js'

/** One Ed25519 key of the edge key set: the current one signs, earlier ones only verify (published). */
export interface EdgeKey {
  kid: string
  publicKey: KeyObject
  /** The public JWK as published (kty, crv, x, kid, alg, use). */
  jwk: JWK
}

export interface EdgeKeys {
  /** The signing key; undefined in production without EDGE_SIGNING_KEY (no ticket codes then). */
  signing: (EdgeKey & { privateKey: KeyObject }) | undefined
  /** Every published key, the signing one first. */
  keys: EdgeKey[]
  byKid(kid: string): EdgeKey | undefined
  /** The JWK Set document of GET /.well-known/jwks.json. */
  jwks: { keys: JWK[] }
}

/**
 * Key ids are the first 11 characters of the RFC 7638 thumbprint (66 bits): stable for a key wherever
 * it is configured, short enough to keep ticket codes small, and never colliding among the handful of
 * keys a rotation keeps.
 */
const KID_LENGTH = 11

/** The published part of a key; a private key given as a previous key keeps only its public half. */
async function edgeKey(key: KeyObject): Promise<EdgeKey> {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key
  const raw = publicKey.export({ format: 'jwk' }) as JWK
  const kid = (await calculateJwkThumbprint(raw, 'sha256')).slice(0, KID_LENGTH)
  return { kid, publicKey, jwk: { kty: raw.kty, crv: raw.crv, x: raw.x, kid, alg: 'EdDSA', use: 'sig' } }
}

/**
 * The signing key: EDGE_SIGNING_KEY when set; otherwise outside production one generated into
 * DATA_DIR/edge-key.pem (mode 0600) with a warning, as for the JWT secret. Production refuses to start
 * without it (config.ts); a configuration built by hand without it runs without ticket codes, warned.
 */
function resolveSigningKey(config: Config, log: Pick<FastifyBaseLogger, 'warn'>): KeyObject | undefined {
  if (config.EDGE_SIGNING_KEY) return config.EDGE_SIGNING_KEY
  if (config.NODE_ENV === 'production') {
    log.warn('EDGE_SIGNING_KEY is not set: ticket codes and /.well-known/jwks.json keys are off')
    return undefined
  }
  const file = path.join(config.DATA_DIR, 'edge-key.pem')
  let pem: string
  try {
    pem = fs.readFileSync(file, 'utf8')
  } catch {
    fs.mkdirSync(config.DATA_DIR, { recursive: true })
    pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
    try {
      fs.writeFileSync(file, pem, { mode: 0o600, flag: 'wx' })
    } catch {
      // Another instance wrote it first: use theirs.
      pem = fs.readFileSync(file, 'utf8')
    }
  }
  log.warn({ file }, 'EDGE_SIGNING_KEY is not set: using a generated development key; set it in production')
  return createPrivateKey(pem)
}

export async function resolveEdgeKeys(
  config: Config,
  log: Pick<FastifyBaseLogger, 'warn'>,
): Promise<EdgeKeys> {
  const privateKey = resolveSigningKey(config, log)
  const signing = privateKey ? { ...(await edgeKey(privateKey)), privateKey } : undefined
  const keys: EdgeKey[] = signing ? [signing] : []
  for (const k of config.EDGE_PREVIOUS_KEYS) {
    const e = await edgeKey(k)
    if (!keys.some((x) => x.kid === e.kid)) keys.push(e)
  }
  const byKid = new Map(keys.map((k) => [k.kid, k]))
  return {
    signing,
    keys,
    byKid: (kid) => byKid.get(kid),
    jwks: { keys: keys.map((k) => k.jwk) },
  }
}

/** The edge keys as the JWT codec takes them (PEM), for EdDSA offline tokens. */
export function jwtEdgeOptions(keys: EdgeKeys, signOffline: boolean) {
  const pem = (k: KeyObject) =>
    k.export({ format: 'pem', type: k.type === 'private' ? 'pkcs8' : 'spki' }).toString()
  return {
    signOffline,
    ...(keys.signing
      ? { signing: { kid: keys.signing.kid, privateKeyPem: pem(keys.signing.privateKey) } }
      : {}),
    verifying: keys.keys.map((k) => ({ kid: k.kid, publicKeyPem: pem(k.publicKey) })),
  }
}
