import fs from 'node:fs'
import path from 'node:path'

/**
 * The release this code belongs to: package.json's `version` (tagged `v<version>` in git, listed in
 * CHANGELOG.md). `wristband --version`, GET /, the `wristband_build_info` metric and the OpenAPI
 * document's `info.x-release` say it, so instances of two releases side by side (a rolling upgrade) are
 * told apart. The document's `info.version` is the interface's version (src/openapi.ts), not this.
 */
export function releaseVersion(): string {
  const file = path.join(packageRoot(), 'package.json')
  return fs.existsSync(file)
    ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version
    : 'unknown'
}

/**
 * The folder of the service's package.json (the checkout or the installed package), found from this
 * module both in src/platform (tsx) and in dist/src/platform (built): the dashboard's assets and the
 * scanner page are served from below it.
 */
export function packageRoot(): string {
  for (const up of ['../..', '../../..']) {
    const dir = path.join(import.meta.dirname, up)
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir
  }
  return path.join(import.meta.dirname, '../..')
}
