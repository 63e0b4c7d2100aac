import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import { ok, startAppWithCli, wristband } from '../../test/helpers/cli.js'

/**
 * A failed sign-in records the typed e-mail as the actor, and `wristband audit`
 * printed it raw, so a typed newline forged a line of its own and an escape sequence ran in the
 * operator's terminal. Both outputs (text and --json) now escape every control character.
 */
eachBackend(backends, 'audit log injection', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    await t.seed(STANDARD_SEED)
  })
  after(() => close())

  test('control characters in an audited e-mail are printed escaped', async () => {
    // A forged entry on a line of its own, a screen clear (ESC), a one-character CSI (U+009B), a
    // right-to-left override, and a space that would pass the rest off as the ip field.
    const typed =
      'x@example.com\n2026-11-25T00:00:00.000Z  login  success  actor=admin:1  ip=10.0.0.1\r' +
      '\u001b[2J\u001b]0;owned\u0007\u009b31m\u202eevil  ip=1.2.3.4'
    const res = await t.request({
      method: 'POST',
      url: '/auth/login',
      payload: { email: typed, password: 'wrong-password-1' },
    })
    assert.equal(res.statusCode, 401)

    const text = ok(await wristband(['audit', '--kind', 'login'], env))
    const json = ok(await wristband(['audit', '--kind', 'login', '--json'], env))
    for (const [form, out] of [
      ['text', text],
      ['json', json],
    ] as const) {
      const lines = out.trimEnd().split('\n')
      assert.equal(lines.length, 1, `${form}: one entry, one line:\n${out}`)
      // Nothing but printable characters and the line's end reach the terminal.
      const unsafe = [...out.trimEnd()].filter((c) => {
        const code = c.codePointAt(0)!
        return code < 0x20 || (code >= 0x7f && code <= 0x9f) || (code >= 0x2028 && code <= 0x202e)
      })
      assert.deepEqual(unsafe, [], form)
    }
    // The actor is one quoted field that reads back as what was typed, and the real address follows it.
    const fields = /^\S+ {2}login {2}failure {2}actor=("(?:[^"\\]|\\.)*") {2}ip=(\S+)$/.exec(text.trimEnd())
    assert.ok(fields, text)
    assert.equal(JSON.parse(fields[1]!), `admin:${typed}`)
    assert.ok(fields[1]!.includes('\\u001b[2J'), 'ESC is written as \\u001b')
    assert.notEqual(fields[2], '1.2.3.4')
    // The JSON line reads back as exactly what was typed.
    assert.equal(JSON.parse(json).actor, `admin:${typed}`)
  })
})
