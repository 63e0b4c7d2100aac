import { randomToken } from '../platform/random.js'
import { type CommandGroup, integerOption, stringOption } from './command.js'

export const secretCommands: CommandGroup = {
  name: 'secret',
  summary: 'Secrets for the configuration.',
  subcommands: {
    generate: {
      summary: 'Print a new random signing secret for JWT_SECRET',
      usage: `Usage: wristband secret generate [--bytes N]

Prints a random secret (URL-safe base64 of N random bytes) for JWT_SECRET or METRICS_TOKEN. It needs
no configuration: it opens no database and writes no file (the secret goes to standard output only).

To rotate the signing secret without signing anyone out, see "Rotating the signing secret" in docs/operations.md.

Options:
  --bytes N            random bytes, 32 to 512 (default 48)`,
      options: { bytes: { type: 'string' } },
      // Run before the first start of a deployment, when there is neither a configuration nor a
      // database yet: creating ./data/wristband.db as a side effect would leave a stray file behind.
      async run(values) {
        const command = 'secret generate'
        const raw = stringOption(values, 'bytes', command, true)
        const bytes = raw === undefined ? 48 : integerOption(raw, 'bytes', command, 32, 512)
        console.log(randomToken(bytes))
        return 0
      },
    },
  },
}
