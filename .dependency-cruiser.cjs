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
      name: 'no-cycles',
      comment:
        'No import cycles between modules. TODO(issue 17): the identities <-> tokens loop is folder-level, not a ' +
        'module cycle (identities.store -> tokens/claims, tokens/token.service -> identities.store), so this rule ' +
        'does not see it; moving the grant builders into src/identities removes it.',
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
