// Comments, test names and package READMEs cite what a reader of the repository can find: a rule said
// in place or a page of docs/. Issue numbers and the specification's own file names (auth-service.md,
// decisions.md, ticket-partner-api.md) point at nothing in a clone; docs/specification.md carries what
// users need of the specification. Run by `npm run lint`.
import fs from 'node:fs'
import path from 'node:path'

const roots = ['src', 'test', 'packages', 'bench', 'scripts', 'deploy']
// Code and the packages' READMEs; bench/FINDINGS.md is a dated record of past measurements, kept as written.
const checked = /(\.(ts|mjs|cjs|js|sh|css|cfg|conf|service|ya?ml)|README\.md)$/
const cited = /\b[Ii]ssues? #?\d+|\b(?:decisions|auth-service|ticket-partner-api)\.md\b/
const self = path.normalize('scripts/check-citations.mjs')

const found = []
for (const root of roots) {
  if (!fs.existsSync(root)) continue
  for (const entry of fs.readdirSync(root, { recursive: true })) {
    const file = path.join(root, String(entry))
    if (file === self || !checked.test(file) || /(^|\/)(node_modules|dist)\//.test(file)) continue
    if (!fs.statSync(file).isFile()) continue
    fs.readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (cited.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`)
      })
  }
}
if (found.length > 0) {
  console.error(
    `${found.join('\n')}\n\n${found.length} citation(s) of issue numbers or specification files that a clone does not have: ` +
      'say the rule itself, or cite the page of docs/ that carries it (docs/specification.md, docs/security.md, ...).',
  )
  process.exit(1)
}
