// Writes README.md's configuration table from `settings` in src/platform/config.ts, the list that also
// validates the settings at start. `npm run docs:config` runs it; a test fails when README.md differs.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { settings } from '../src/platform/config.js'

export const START = '<!-- config:start -->'
export const END = '<!-- config:end -->'
export const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../README.md')

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ')

function shownDefault(value: string | undefined): string {
  if (value === undefined) return 'unset'
  if (value === '') return 'empty'
  return `\`${cell(value)}\``
}

/** The table, its columns padded the way the formatter (Biome) lays out Markdown tables. */
export function configTable(): string {
  const rows = [
    ['Setting', 'Default', 'Meaning'],
    ...Object.entries(settings).map(([name, s]) => [
      `\`${name}\``,
      shownDefault(s.default),
      cell(s.description),
    ]),
  ]
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`
  return [line(rows[0]!), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join('\n')
}

/** The README with the text between the markers replaced by the generated table. */
export function withConfigTable(readme: string): string {
  const start = readme.indexOf(START)
  const end = readme.indexOf(END)
  if (start < 0 || end < start) throw new Error(`README.md lacks the ${START} … ${END} markers`)
  return `${readme.slice(0, start + START.length)}\n${configTable()}\n${readme.slice(end)}`
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const current = fs.readFileSync(README, 'utf8')
  const next = withConfigTable(current)
  if (next === current) console.log('README.md configuration table is up to date')
  else {
    fs.writeFileSync(README, next)
    console.log('README.md configuration table regenerated')
  }
}
