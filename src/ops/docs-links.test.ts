// The README and docs/ stand alone: a clone has no folder beside the repository to link to.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

function markdownFiles(): string[] {
  const docs = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))
  const examples = fs.existsSync(path.join(ROOT, 'examples'))
    ? fs.readdirSync(path.join(ROOT, 'examples')).filter((f) => f.endsWith('.md'))
    : []
  return [
    'README.md',
    ...docs.map((f) => path.join('docs', f)),
    ...examples.map((f) => path.join('examples', f)),
  ]
}

test('README, docs/ and examples/ link only to files of the repository, never outside it', () => {
  const broken: string[] = []
  for (const file of markdownFiles()) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8')
    if (/\.\.\/shared\//.test(text)) broken.push(`${file}: mentions ../shared/`)
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!
      if (/^[a-z]+:/i.test(target) || target.startsWith('#')) continue
      const resolved = path.resolve(ROOT, path.dirname(file), target.split('#')[0]!)
      if (!resolved.startsWith(ROOT)) broken.push(`${file}: ${target} leaves the repository`)
      else if (!fs.existsSync(resolved)) broken.push(`${file}: ${target} does not exist`)
    }
  }
  assert.deepEqual(broken, [])
})
