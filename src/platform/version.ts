import fs from 'node:fs'
import path from 'node:path'

/**
 * The release this code belongs to: package.json's `version` (tagged `v<version>` in git, listed in
 * CHANGELOG.md). `wristband --version`, GET /, the `wristband_build_info` metric and the OpenAPI
 * document's `info.x-release` say it, so instances of two releases side by side (a rolling upgrade) are
 * told apart. The document's `info.version` is the interface's version (src/openapi.ts), not this.
 */
export function releaseVersion(): string {
  // src/platform under tsx, dist/src/platform once compiled.
  for (const up of ['../..', '../../..']) {
    const file = path.join(import.meta.dirname, up, 'package.json')
    if (fs.existsSync(file)) return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version
  }
  return 'unknown'
}
