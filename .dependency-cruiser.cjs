/**
 * Layering rules of wristband (see docs/architecture.md). Run with `npm run lint:deps`.
 *
 * Layers: src/platform (shared mechanisms) <- src/<feature>/ (features) <- src/app.ts (app factory)
 * <- src/server.ts, src/cli.ts (entry points). Test support lives in test/helpers.
 *
 * The rules are checked on the compiled JavaScript in dist/ (`npm run build`): TypeScript 7 (native) has no
 * JS API dependency-cruiser can load, and the other TypeScript parser it supports (swc) has no build for
 * this registry. The compiled modules keep every run-time import of the sources, one file per source file,
 * and drop `import type` (which is no dependency at run time).
 */

/** Feature folders: every folder of src/ except platform. */
const FEATURE = '^dist/src/(?!platform/)[^/]+/'

/** Test code: *.test.ts and test/ (the helpers). */
const TEST_CODE = ['\\.test\\.js$', '^dist/test/']

/**
 * The public surface of the features: the only modules another feature may import. By name, every
 * feature's `*.store.ts` (the queries of the tables it owns), `*.service.ts` (its rules) and
 * `*.schemas.ts` (its request and answer shapes); besides those, the few modules listed here. A
 * feature's routes, templates and helpers are its own. To share something else, move it into one of
 * these modules, name it here (say why), or, when it holds no feature knowledge, move it to platform/.
 */
const PUBLIC_BY_NAME = '\\.(store|service|schemas)\\.js$'
const PUBLIC_MODULES = {
  // The credential that turns an API key into claims, for the partner hooks.
  'api-keys': ['api-key.credential'],
  // The QR image of a ticket code, shown by partner mail and the holder pages; the edge key set, whose
  // Ed25519 key the token authority signs and checks offline tokens with; the ticket code's format (its
  // typ and claims), which use-batch checks a code a scan carries against.
  edge: ['qr', 'edge-keys', 'ticket-codes'],
  // The grant a token carries, built from the stored accounts.
  identities: ['grants'],
  // The metrics registry the token service counts into (a type-only import today, which the compiled
  // code does not show; named so that a run-time import stays within the rule).
  metrics: ['metrics'],
  // The partner API-key hooks and rate limit, shared by the partner-facing features.
  partner: ['partner-auth'],
  // Claims and the route guard: what every protected route uses.
  tokens: ['claims', 'guard'],
}
const PUBLIC_NAMED = Object.entries(PUBLIC_MODULES).flatMap(([feature, modules]) =>
  modules.map((m) => `^dist/src/${feature}/${m.replace(/\./g, '\\.')}\\.js$`),
)

module.exports = {
  forbidden: [
    {
      name: 'platform-imports-no-feature',
      comment:
        'src/platform holds shared mechanisms; it must not depend on a feature folder (nor on app.ts).',
      severity: 'error',
      from: { path: '^dist/src/platform/', pathNot: TEST_CODE },
      to: { path: [FEATURE, '^dist/src/app\\.js$', '^dist/src/server\\.js$', '^dist/src/cli\\.js$'] },
    },
    {
      name: 'feature-imports-public-surface',
      comment:
        'A feature imports another feature only through its public surface: *.store, *.service, *.schemas and ' +
        'the modules named in PUBLIC_MODULES. The entry points (src/cli/) and test code may reach any module.',
      severity: 'error',
      from: { path: '^dist/src/([^/]+)/', pathNot: ['^dist/src/(platform|cli)/', ...TEST_CODE] },
      to: {
        path: '^dist/src/(?!platform/)(?!$1/)[^/]+/',
        pathNot: [PUBLIC_BY_NAME, ...PUBLIC_NAMED],
      },
    },
    {
      name: 'cli-calls-services',
      comment:
        'The command line (src/cli/, src/cli.ts) calls services, not stores: a break-glass command and the HTTP ' +
        "route that does the same take one path through the feature's *.service.ts (its rules, its checks).",
      severity: 'error',
      from: { path: ['^dist/src/cli/', '^dist/src/cli\\.js$'], pathNot: TEST_CODE },
      to: { path: '\\.store\\.js$' },
    },
    {
      name: 'no-cycles',
      comment: 'No import cycles between modules.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'production-imports-no-test-code',
      comment: 'Production code must not import test helpers or *.test.ts.',
      severity: 'error',
      from: { path: '^dist/src/', pathNot: TEST_CODE },
      to: { path: TEST_CODE },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.js', '.mjs', '.cjs', '.json'],
    },
  },
}
