import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ok, wristband } from '../../test/helpers/cli.js'

/**
 * Third audit (docs/security.md, "Third audit"): `wristband --help` did not list `admin reset-passkeys`
 * or `device revoke`. The help names every command the command line dispatches: each command group's
 * line lists exactly the commands the group runs (its own `--help`, printed from the table it dispatches
 * on), and every command the help names runs.
 */
const ENV = { JWT_SECRET: 'unused-secret-that-is-at-least-32-bytes-long' }

/** The command lines of a usage text's section: the first word or two of each indented line. */
function section(text: string, heading: RegExp): string[] {
  const lines = text.split('\n')
  const start = lines.findIndex((l) => heading.test(l))
  assert.ok(start >= 0, `no section ${heading} in:\n${text}`)
  const out: string[] = []
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break
    if (/^ {2}\S/.test(line)) out.push(line.trim())
  }
  return out
}

test('wristband --help lists every command the command line dispatches', async () => {
  const help = ok(await wristband(['--help'], ENV))
  const groups = section(help, /^Break-glass administration/)
    .map((l) => /^([a-z]+) ([a-z-]+(?:\|[a-z-]+)*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ name: m[1]!, listed: m[2]!.split('|') }))
  assert.deepEqual(
    groups.map((g) => g.name),
    ['admin', 'apikey', 'device', 'secret'],
  )
  for (const group of groups) {
    // The group's own help is printed from the commands it dispatches.
    const own = section(ok(await wristband([group.name, '--help'], ENV)), /^Commands:/).map(
      (l) => l.split(/\s+/)[0]!,
    )
    assert.deepEqual(
      [...group.listed].sort(),
      [...own].sort(),
      `wristband --help lists ${group.name}'s commands`,
    )
    for (const sub of own)
      assert.match(
        ok(await wristband([group.name, sub, '--help'], ENV)),
        /^Usage: wristband /,
        `${group.name} ${sub}`,
      )
  }
  const listed = groups.flatMap((g) => g.listed.map((s) => `${g.name} ${s}`))
  for (const command of ['admin reset-passkeys', 'admin end-tokens', 'device revoke', 'device setup-code'])
    assert.ok(listed.includes(command), `${command} is missing from wristband --help`)
  // The other commands the help names run too.
  const others = [...section(help, /^Commands:/), ...section(help, /^Break-glass administration/)]
    .map((l) => l.split(/\s+/)[0]!)
    .filter((name) => /^[a-z]+$/.test(name) && !groups.some((g) => g.name === name))
  assert.deepEqual(others, ['serve', 'migrate', 'seed', 'backup', 'audit'])
  for (const name of others)
    assert.match(ok(await wristband([name, '--help'], ENV)), /^Usage: wristband /, name)
  const unknown = await wristband(['frobnicate'], ENV)
  assert.equal(unknown.code, 2)
})
