import { randomToken } from '../platform/random.js'
import { audited, type CommandGroup, integerOption, stringOption, withContext } from './command.js'

export const secretCommands: CommandGroup = {
  name: 'secret',
  summary: 'Secrets for the configuration.',
  subcommands: {
    generate: {
      summary: 'Print a new random signing secret for JWT_SECRET',
      usage: `Usage: wristband secret generate [--bytes N]

Prints a random secret (URL-safe base64 of N random bytes) for JWT_SECRET or METRICS_TOKEN. The
generation is recorded in the audit log of the configured database; the secret is not.

To rotate the signing secret without signing anyone out, see "Rotating the signing secret" in docs/operations.md.

Options:
  --bytes N            random bytes, 32 to 512 (default 48)`,
      options: { bytes: { type: 'string' } },
      async run(values, loadConfig) {
        const command = 'secret generate'
        const raw = stringOption(values, 'bytes', command, true)
        const bytes = raw === undefined ? 48 : integerOption(raw, 'bytes', command, 32, 512)
        const secret = randomToken(bytes)
        // The secret is what a production configuration lacks before its first start; let it stand in
        // so that the audit record reaches the configured database.
        await withContext(loadConfig({ JWT_SECRET: secret }), (ctx) =>
          audited(ctx, 'cli_secret_generate', async () => ({ detail: { bytes } })),
        )
        console.log(secret)
        return 0
      },
    },
  },
}
