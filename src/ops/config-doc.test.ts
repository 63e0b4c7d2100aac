import assert from 'node:assert/strict'
import fs from 'node:fs'
import { test } from 'node:test'
import { configTable, README, withConfigTable } from '../../scripts/config-doc.js'
import { loadConfig, settings } from '../platform/config.js'

test("README.md's configuration table is the one generated from the settings", () => {
  const readme = fs.readFileSync(README, 'utf8')
  assert.equal(
    withConfigTable(readme),
    readme,
    'README.md differs from the settings in src/platform/config.ts: run `npm run docs:config`',
  )
})

test('the table lists every setting, and every listed default passes the check run at start', () => {
  const table = configTable()
  for (const name of Object.keys(settings)) assert.match(table, new RegExp(`^\\| \`${name}\` +\\|`, 'm'))
  const defaults = Object.fromEntries(
    Object.entries(settings)
      .filter(([, s]) => s.default !== undefined)
      .map(([name, s]) => [name, s.default as string]),
  )
  assert.doesNotThrow(() => loadConfig(defaults))
})
