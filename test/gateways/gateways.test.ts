// The gateway recipes of deploy/gateways/, run as shipped: Debian's nginx (auth_request) and Caddy
// (forward_auth) in front of a small app that echoes the X-Auth-* headers it gets, asking a running
// instance GET /tokens/check about every request. The files are the shipped ones with the listen
// port, the two upstream addresses and the credential substituted. A good token passes with its
// claims; a missing, bad, expired, revoked or refresh token is 401 and a wrong role 403, and the app
// never sees those requests; with the service stopped the client gets an error from the gateway, never
// the app's answer. Skipped with a note naming the package when a binary is missing. The Traefik and
// Envoy files (not packaged here) are only parsed and checked for what they name.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { createApiKey } from '../../src/api-keys/api-keys.store.js'
import { createTokenAuthority } from '../../src/tokens/authority.js'
import { JwtCodec } from '../../src/tokens/jwt.js'
import { VERIFY_LIMITS } from '../../src/tokens/verify.routes.js'
import { login, STANDARD_SEED, startApp, TEST_SECRET, type TestApp, verifyToken } from '../helpers/app.js'
import { httpBackends } from '../helpers/backends.js'
import { portOf } from '../helpers/lane.js'
import { freePort } from '../helpers/processes.js'
import { until } from '../helpers/until.js'

const RECIPES = fileURLToPath(new URL('../../deploy/gateways/', import.meta.url))
const recipe = (name: string) => fs.readFileSync(path.join(RECIPES, name), 'utf8')

/** `text` with each `[from, to]` replaced everywhere; a `from` the file no longer holds fails the test. */
function substitute(file: string, text: string, pairs: [string, string][]): string {
  let out = text
  for (const [from, to] of pairs) {
    assert.ok(out.includes(from), `${file} no longer holds ${JSON.stringify(from)}: update this test`)
    out = out.split(from).join(to)
  }
  return out
}

interface Ports {
  listen: number
  wristband: number
  app: number
}

interface Gateway {
  name: string
  skip: string | undefined
  /** Starts the gateway on `ports.listen` in `dir`, from the shipped files. */
  start(ports: Ports, credential: string, dir: string): ChildProcess
  /** What a client gets for a 401 besides the status (nginx passes WWW-Authenticate on; so does Caddy). */
  challenge: boolean
}

const installed = (cmd: string, args: string[]) => spawnSync(cmd, args).status === 0

const nginx: Gateway = {
  name: 'nginx auth_request (deploy/gateways/nginx.conf)',
  skip: installed('nginx', ['-v'])
    ? undefined
    : 'nginx is not installed (apt-get install nginx): nginx gateway test SKIPPED',
  challenge: true,
  start(ports, credential, dir) {
    fs.writeFileSync(
      path.join(dir, 'site.conf'),
      substitute('nginx.conf', recipe('nginx.conf'), [
        ['listen 8080;', `listen 127.0.0.1:${ports.listen};`],
        ['server 127.0.0.1:8000;', `server 127.0.0.1:${ports.wristband};`],
        ['server 127.0.0.1:9000;', `server 127.0.0.1:${ports.app};`],
      ]),
    )
    fs.writeFileSync(
      path.join(dir, 'wristband-check.conf'),
      substitute('wristband-check.conf', recipe('wristband-check.conf'), [
        ['wb_REPLACE_WITH_YOUR_VERIFY_CREDENTIAL', credential],
      ]),
    )
    fs.writeFileSync(path.join(dir, 'wristband-claims.conf'), recipe('wristband-claims.conf'))
    // The main configuration around the site, everything in the temporary folder (Debian's build puts
    // its temporary files under /var/lib/nginx).
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
      .map((k) => `    ${k}_temp_path ${path.join(dir, `${k}_temp`)};`)
      .join('\n')
    fs.writeFileSync(
      path.join(dir, 'nginx.conf'),
      `pid ${path.join(dir, 'nginx.pid')};\nerror_log ${path.join(dir, 'error.log')};\n` +
        `events {}\nhttp {\n    access_log off;\n${temp}\n    include site.conf;\n}\n`,
    )
    return spawn(
      'nginx',
      [
        '-p',
        `${dir}/`,
        '-c',
        path.join(dir, 'nginx.conf'),
        '-e',
        path.join(dir, 'error.log'),
        '-g',
        'daemon off;',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
  },
}

const caddy: Gateway = {
  name: 'Caddy forward_auth (deploy/gateways/Caddyfile)',
  skip: installed('caddy', ['version'])
    ? undefined
    : 'caddy is not installed (apt-get install caddy): Caddy gateway test SKIPPED',
  challenge: true,
  start(ports, credential, dir) {
    const file = path.join(dir, 'Caddyfile')
    fs.writeFileSync(
      file,
      substitute('Caddyfile', recipe('Caddyfile'), [
        ['app.example.com {', `http://127.0.0.1:${ports.listen} {`],
        ['127.0.0.1:8000', `127.0.0.1:${ports.wristband}`],
        ['127.0.0.1:9000', `127.0.0.1:${ports.app}`],
      ]),
    )
    return spawn('caddy', ['run', '--config', file, '--adapter', 'caddyfile'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        XDG_DATA_HOME: dir,
        XDG_CONFIG_HOME: dir,
        WRISTBAND_VERIFY_KEY: credential,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  },
}

/** The app behind the gateway: answers every request with the headers it got, and counts them. */
function echoApp() {
  let count = 0
  const server = http.createServer((req, res) => {
    count++
    const body = JSON.stringify({ path: req.url, headers: req.headers })
    res.writeHead(200, { 'content-type': 'application/json', 'x-from-app': '1' })
    res.end(body)
  })
  return { server, count: () => count }
}

interface Seen {
  status: number
  headers: Headers
  body: string
  /** The headers the app got, when the app answered. */
  app?: Record<string, string>
}

for (const gateway of [nginx, caddy]) {
  describe(gateway.name, gateway.skip ? { skip: gateway.skip } : {}, () => {
    let t: TestApp
    let dir: string
    let proc: ChildProcess | undefined
    let output = ''
    let origin: string
    let credential: string
    const app = echoApp()

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-gateway-'))
      // Two checks a minute per client address without a credential: every check of the suite comes from
      // one address (the gateway's client), so they pass only because the gateway's credential counts them.
      t = await startApp(httpBackends[0]!, {}, undefined, {
        verifyLimits: { ...VERIFY_LIMITS, anonymousPerMinute: 2 },
      })
      await t.seed(STANDARD_SEED)
      credential = (
        await createApiKey(t.db.db, {
          event_id: 1,
          name: 'gateway',
          scopes: ['tokens:verify'],
          created_by: null,
          now: t.clock.now(),
        })
      ).plaintext
      await t.app.listen({ host: '127.0.0.1', port: 0 })
      await new Promise<void>((resolve) => app.server.listen(0, '127.0.0.1', resolve))
      const ports = {
        listen: await freePort(),
        wristband: portOf(t),
        app: (app.server.address() as { port: number }).port,
      }
      origin = `http://127.0.0.1:${ports.listen}`
      proc = gateway.start(ports, credential, dir)
      const keep = (d: Buffer) => {
        output = (output + d).slice(-20_000)
      }
      proc.stdout!.on('data', keep)
      proc.stderr!.on('data', keep)
      await until('the gateway to answer', async () => {
        if (proc!.exitCode !== null) throw new Error(`${gateway.name} exited: ${output}`)
        try {
          await fetch(`${origin}/`)
          return true
        } catch {
          return false
        }
      })
    })

    after(async () => {
      // nginx's workers outlive a master killed outright: a TERM has the master end them first.
      if (proc && proc.exitCode === null) {
        const exited = new Promise((resolve) => proc!.once('exit', resolve))
        proc.kill('SIGTERM')
        await exited
      }
      await new Promise((resolve) => app.server.close(resolve))
      await t?.close()
      fs.rmSync(dir, { recursive: true, force: true })
    })

    async function get(urlPath: string, token?: string, headers: Record<string, string> = {}): Promise<Seen> {
      const res = await fetch(`${origin}${urlPath}`, {
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      })
      const body = await res.text()
      const fromApp = res.headers.get('x-from-app') === '1'
      return {
        status: res.status,
        headers: res.headers,
        body,
        ...(fromApp ? { app: JSON.parse(body).headers } : {}),
      }
    }

    /** A request the gateway must refuse with `status`: the app never sees it. */
    async function refused(what: string, status: number, urlPath: string, token?: string, headers = {}) {
      const before = app.count()
      const res = await get(urlPath, token, headers)
      assert.equal(res.status, status, `${what}: ${res.status} ${res.body.slice(0, 200)}\n${output}`)
      assert.equal(res.app, undefined, `${what}: the app answered`)
      assert.equal(app.count(), before, `${what}: the app was reached`)
      return res
    }

    test('a good token passes with its claims; the app gets the check’s X-Auth-* headers only', async () => {
      const { access_token } = await login(t, 'ev1@example.com')
      const claims = (await verifyToken(t, access_token)).claims
      const forged = {
        'x-auth-role': 'superadmin',
        'x-auth-subject': '999',
        'x-auth-claims': 'e30',
        'x-auth-event-ids': '1,2,3',
      }
      // More checks than the client address's own budget (2 a minute): they count against the gateway's.
      for (let i = 0; i < 4; i++) {
        const res = await get('/tickets?page=2', access_token, forged)
        assert.equal(res.status, 200, `${res.body}\n${output}`)
        const seen = res.app!
        assert.equal(seen['x-auth-subject'], claims.sub)
        assert.equal(seen['x-auth-role'], 'admin')
        assert.equal(seen['x-auth-token-type'], 'access')
        assert.equal(seen['x-auth-expires'], String(claims.exp))
        assert.equal(seen['x-auth-event-ids'], '1')
        assert.deepEqual(JSON.parse(Buffer.from(seen['x-auth-claims']!, 'base64url').toString()), claims)
        assert.equal(JSON.parse(res.body).path, '/tickets?page=2', 'the original request goes on')
        assert.ok(
          !JSON.stringify(seen).includes(credential),
          'the gateway’s credential stays with the gateway',
        )
      }

      // A token naming no event: the client's X-Auth-Event-Ids does not get through either.
      const root = (await login(t, 'root@example.com')).access_token
      const res = await get('/admin/settings', root, forged)
      assert.equal(res.status, 200, res.body)
      assert.equal(res.app!['x-auth-role'], 'admin')
      assert.ok(!res.app!['x-auth-event-ids'], `no event ids: ${res.app!['x-auth-event-ids']}`)
    })

    test('no token, a bad, expired, revoked or refresh token: 401, and the app never sees it', async () => {
      const none = await refused('no token', 401, '/')
      if (gateway.challenge) assert.match(String(none.headers.get('www-authenticate')), /^Bearer/)
      const bad = await refused('a bad token', 401, '/', 'not-a-token')
      if (gateway.challenge) assert.equal(bad.headers.get('www-authenticate'), 'Bearer error="invalid_token"')

      const { access_token, refresh_token } = await login(t, 'ev1@example.com')
      const claims = (await verifyToken(t, access_token)).claims
      const { jti: _j, iat: _i, exp: _e, aud: _a, iss: _s, ...grant } = claims
      const expired = new JwtCodec({
        secret: TEST_SECRET,
        previousSecrets: [],
        audience: t.config.JWT_AUDIENCE,
        issuer: t.config.JWT_ISSUER,
        clock: { now: () => t.clock.now() - 3_600_000 },
      }).issue(grant, 15 * 60).token
      await refused('an expired token', 401, '/', expired)

      await refused('a refresh token', 401, '/', refresh_token)
      await refused('a refresh token with a requirement header of its own', 401, '/', refresh_token, {
        'wristband-require-type': 'refresh',
      })

      // Revoked as the command line revokes: written to the database, which the instance follows.
      assert.equal((await get('/', access_token)).status, 200)
      const authority = createTokenAuthority({
        db: t.db.db,
        clock: t.clock,
        log: t.app.log,
        redis: undefined,
        config: t.config,
        sessionStores: [],
      })
      await authority.revoke([{ jti: String(claims.jti), expiresAt: Number(claims.exp) * 1000 }])
      await until(
        'the gateway refuses the revoked token',
        async () => (await get('/', access_token)).status === 401,
      )
      await refused('a revoked token', 401, '/', access_token)
    })

    test('a good token of the wrong role: 403 where the check requires administrators', async () => {
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const res = await refused('an operator at /admin/', 403, '/admin/users', operator)
      if (gateway === caddy)
        assert.equal(res.headers.get('www-authenticate'), 'Bearer error="insufficient_scope"')
      assert.equal((await get('/elsewhere', operator)).status, 200, 'elsewhere any good token passes')
      const admin = (await login(t, 'ev1@example.com')).access_token
      assert.equal((await get('/admin/users', admin)).status, 200)
    })

    // Stops the service, so it runs last.
    test('with the service stopped: an error from the gateway, never the app’s answer', async () => {
      const { access_token } = await login(t, 'ev1@example.com')
      assert.equal((await get('/', access_token)).status, 200)
      await t.app.close()
      const res = await get('/', access_token)
      assert.ok(res.status >= 500 && res.status <= 599, `status ${res.status}`)
      assert.equal(res.app, undefined, 'the app answered')
    })
  })
}

describe('Traefik and Envoy recipes (not run here: not packaged in Debian 12)', () => {
  interface Named {
    [key: string]: unknown
  }
  test('deploy/gateways/traefik.yml parses, and its routers name middlewares and services it defines', () => {
    const doc = parse(recipe('traefik.yml')) as {
      http: {
        routers: Record<string, { middlewares: string[]; service: string }>
        middlewares: Record<string, { forwardAuth?: Named; headers?: { customRequestHeaders: Named } }>
        services: Named
      }
    }
    const { routers, middlewares, services } = doc.http
    for (const [name, router] of Object.entries(routers)) {
      assert.ok(services[router.service], `${name}: service ${router.service}`)
      for (const m of router.middlewares) assert.ok(middlewares[m], `${name}: middleware ${m}`)
      // The credential is set before the check and removed after it.
      const [first, , last] = router.middlewares.map((m) => middlewares[m]!)
      assert.ok(first?.headers?.customRequestHeaders.api_key, `${name}: credential first`)
      assert.equal(last?.headers?.customRequestHeaders.api_key, '', `${name}: credential removed last`)
    }
    const checks = Object.values(middlewares).flatMap((m) => (m.forwardAuth ? [m.forwardAuth] : []))
    assert.equal(checks.length, 2)
    for (const check of checks) {
      assert.match(String(check.address), /^http:\/\/127\.0\.0\.1:8000\/tokens\/check(\?role=admin)?$/)
      assert.deepEqual(check.authRequestHeaders, ['Authorization', 'api_key'])
      assert.deepEqual(check.authResponseHeaders, [
        'X-Auth-Subject',
        'X-Auth-Role',
        'X-Auth-Token-Type',
        'X-Auth-Expires',
        'X-Auth-Event-Ids',
        'X-Auth-Claims',
      ])
    }
  })

  test('deploy/gateways/envoy.yaml parses, refuses on error, and names clusters it defines', () => {
    const doc = parse(recipe('envoy.yaml')) as {
      static_resources: {
        listeners: { filter_chains: { filters: { typed_config: Named }[] }[] }[]
        clusters: { name: string }[]
      }
    }
    const clusters = doc.static_resources.clusters.map((c) => c.name)
    const hcm = doc.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config as {
      route_config: { virtual_hosts: { routes: { route: { cluster: string } }[] }[] }
      http_filters: { name: string; typed_config: Named }[]
    }
    for (const route of hcm.route_config.virtual_hosts[0]!.routes)
      assert.ok(clusters.includes(route.route.cluster), route.route.cluster)
    const names = hcm.http_filters.map((f) => f.name)
    assert.deepEqual(names, [
      'envoy.filters.http.header_mutation',
      'envoy.filters.http.ext_authz',
      'envoy.filters.http.router',
    ])
    const authz = hcm.http_filters[1]!.typed_config as {
      failure_mode_allow: boolean
      status_on_error: { code: string }
      http_service: {
        server_uri: { cluster: string }
        path_prefix: string
        authorization_request: { headers_to_add: { key: string }[] }
        authorization_response: { allowed_upstream_headers: { patterns: Named[] } }
      }
    }
    assert.equal(authz.failure_mode_allow, false)
    assert.equal(authz.status_on_error.code, 'ServiceUnavailable')
    assert.ok(clusters.includes(authz.http_service.server_uri.cluster))
    assert.equal(authz.http_service.path_prefix, '/tokens/check')
    assert.deepEqual(
      authz.http_service.authorization_request.headers_to_add.map((h) => h.key),
      ['api_key'],
    )
    assert.deepEqual(authz.http_service.authorization_response.allowed_upstream_headers.patterns, [
      { prefix: 'x-auth-' },
    ])
    const removed = (
      hcm.http_filters[0]!.typed_config as { mutations: { request_mutations: { remove: string }[] } }
    ).mutations.request_mutations.map((m) => m.remove)
    assert.deepEqual(removed, [
      'x-auth-subject',
      'x-auth-role',
      'x-auth-token-type',
      'x-auth-expires',
      'x-auth-event-ids',
      'x-auth-claims',
    ])
  })
})
