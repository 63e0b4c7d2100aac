import fs from 'node:fs'
import {
  type AdminSummary,
  createAdministrator,
  findAdministrator,
  findNetworkManagerSignIn,
  findOperatorByEmail,
  resetAdministratorMfa,
  setAdminDisabled,
} from '../admin/admin.service.js'
import { findDashboardUserSignIn } from '../dashboard/dashboard-users.service.js'
import { removeAllPasskeys } from '../passkeys/passkeys.service.js'
import { changePassword } from '../password-reset/password-change.service.js'
import type { Db } from '../platform/db/database.js'
import { hashPassword } from '../platform/passwords.js'
import { randomToken } from '../platform/random.js'
import { CliError, type CommandGroup, integerOption, type Subcommand, stringOption } from './command.js'
import { audited, type CliContext, withContext } from './context.js'

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const SELECT_HELP = `  --email EMAIL        the administrator's e-mail address
  --id ID              or the administrator's id`
const PASSWORD_HELP = `  --password-stdin     read the new password from standard input (8 to 128 characters);
                       without it a random password is generated and printed once`

type Values = Parameters<Subcommand['run']>[0]
const selectOptions = { email: { type: 'string' }, id: { type: 'string' } } as const

type Selector = { email: string } | { id: number }

function parseSelector(values: Values, command: string): Selector {
  const email = stringOption(values, 'email', command, true)
  const rawId = stringOption(values, 'id', command, true)
  if ((email === undefined) === (rawId === undefined))
    throw new CliError(`wristband ${command}: give either --email or --id (see --help)`)
  return email !== undefined ? { email: email.toLowerCase() } : { id: integerOption(rawId!, 'id', command) }
}

async function findAdmin(db: Db, selector: Selector, command: string): Promise<AdminSummary> {
  const row = await findAdministrator(db, selector)
  if (!row)
    throw new CliError(
      `wristband ${command}: no administrator with ${'email' in selector ? `e-mail ${selector.email}` : `id ${selector.id}`}`,
      1,
    )
  return row
}

/** The new password: from standard input when asked, otherwise generated (and shown once). */
function newPassword(values: Values, command: string): { password: string; generated: boolean } {
  if (!values['password-stdin']) return { password: randomToken(18), generated: true }
  const password = fs.readFileSync(0, 'utf8').replace(/\r?\n$/, '')
  if (password.length < 8 || password.length > 128)
    throw new CliError(`wristband ${command}: the password must be 8 to 128 characters`)
  return { password, generated: false }
}

const create: Subcommand = {
  summary: 'Create an administrator',
  usage: `Usage: wristband admin create --email EMAIL --role admin|superadmin [--event-ids 1,2] [--password-stdin]

Creates an administrator on the configured database and records it in the audit log.

Options:
  --email EMAIL        e-mail address to sign in with
  --role ROLE          admin (limited to --event-ids) or superadmin (every event)
  --event-ids IDS      comma-separated event ids; required for role admin
${PASSWORD_HELP}`,
  options: {
    email: { type: 'string' },
    role: { type: 'string' },
    'event-ids': { type: 'string' },
    'password-stdin': { type: 'boolean' },
  },
  async run(values, loadConfig) {
    const command = 'admin create'
    const email = stringOption(values, 'email', command).toLowerCase()
    if (!EMAIL.test(email) || email.length > 254)
      throw new CliError(`wristband ${command}: --email is not an e-mail address: "${email}"`)
    const role = stringOption(values, 'role', command)
    if (role !== 'admin' && role !== 'superadmin')
      throw new CliError(`wristband ${command}: --role must be admin or superadmin, got "${role}"`)
    const rawIds = stringOption(values, 'event-ids', command, true)
    const eventIds = (rawIds ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => integerOption(s, 'event-ids', command))
    if (role === 'admin' && eventIds.length === 0)
      throw new CliError(
        `wristband ${command}: an admin needs --event-ids (a superadmin reaches every event)`,
      )
    const { password, generated } = newPassword(values, command)
    const passwordHash = await hashPassword(password)
    const created = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_admin_create', async (tx) => {
        const created = await createAdministrator(tx, {
          email,
          passwordHash,
          role,
          eventIds,
          now: ctx.clock.now(),
        })
        if ('missingEvents' in created)
          throw new CliError(`wristband ${command}: no event with id ${created.missingEvents.join(', ')}`, 1)
        if ('emailTaken' in created)
          throw new CliError(`wristband ${command}: an administrator with e-mail ${email} exists`, 1)
        const { id } = created
        return { id, detail: { admin_id: id, email, role, event_ids: eventIds } }
      }),
    )
    console.log(`created administrator ${created.id} (${email}, ${role})`)
    if (generated) console.log(`password: ${password}`)
    return 0
  },
}

/**
 * Finds the administrator, applies `change` and (when asked) ends their sessions and tokens through
 * the token authority, all in the audited transaction: from its commit on every instance refuses them
 * (at once: the ended token generation is published after the commit).
 */
async function onAdmin(
  ctx: CliContext,
  target: { selector: Selector; command: string; kind: string; endSessions: boolean },
  change: (tx: Db, admin: AdminSummary) => Promise<Record<string, unknown>>,
) {
  const result = await audited(ctx, target.kind, async (tx) => {
    const admin = await findAdmin(tx, target.selector, target.command)
    const extra = await change(tx, admin)
    const ended = target.endSessions ? await ctx.authority.endSessions(tx, 'admin', admin.id) : undefined
    return {
      admin,
      ended,
      detail: { admin_id: admin.id, email: admin.email, ...extra, ...(ended ? { tokens_ended: true } : {}) },
    }
  })
  await result.ended?.publish()
  return {
    admin: result.admin,
    sessions: `${result.ended?.sessions ?? 0} session(s) ended, every token revoked`,
  }
}

function setDisabled(disabled: 0 | 1): Subcommand {
  const verb = disabled ? 'disable' : 'enable'
  return {
    summary: disabled
      ? 'Disable an administrator and end their sessions'
      : 'Enable a disabled administrator again',
    usage: `Usage: wristband admin ${verb} (--email EMAIL | --id ID)

${
  disabled
    ? 'Stops the administrator from signing in and ends every token minted for them (access, refresh and\noffline tokens, refused fleet-wide within a second) and their dashboard sessions.'
    : 'Lets a disabled administrator sign in again.'
} Recorded in the audit log.

Options:
${SELECT_HELP}`,
    options: selectOptions,
    async run(values, loadConfig) {
      const command = `admin ${verb}`
      const selector = parseSelector(values, command)
      await withContext(loadConfig(), async (ctx) => {
        const target = { selector, command, kind: `cli_admin_${verb}`, endSessions: disabled === 1 }
        const { admin, sessions } = await onAdmin(ctx, target, async (tx, a) => {
          await setAdminDisabled(tx, a.id, disabled, ctx.clock.now())
          return { was_disabled: a.disabled === 1 }
        })
        console.log(`${verb}d administrator ${admin.id} (${admin.email})${disabled ? `; ${sessions}` : ''}`)
      })
      return 0
    },
  }
}

const resetMfa: Subcommand = {
  summary: 'Turn off MFA of an administrator locked out of it, and end their sessions',
  usage: `Usage: wristband admin reset-mfa (--email EMAIL | --id ID)

For an administrator who lost their authenticator: switches two-factor authentication off, forgets
the enrolled and pending TOTP secrets, and ends every token minted for them (access, refresh and
offline) and their dashboard sessions, so the administrator signs in with their password and enrols
again. No HTTP route can do this. Recorded in the audit log.

Options:
${SELECT_HELP}`,
  options: selectOptions,
  async run(values, loadConfig) {
    const command = 'admin reset-mfa'
    const selector = parseSelector(values, command)
    await withContext(loadConfig(), async (ctx) => {
      const target = { selector, command, kind: 'cli_admin_reset_mfa', endSessions: true }
      const { admin, sessions } = await onAdmin(ctx, target, async (tx, a) => {
        return { cleared: await resetAdministratorMfa(tx, a, ctx.clock.now()) }
      })
      console.log(`MFA reset for administrator ${admin.id} (${admin.email}); ${sessions}`)
    })
    return 0
  },
}

const resetPasskeys: Subcommand = {
  summary: 'Remove every passkey of an account that lost them, and end its sessions',
  usage: `Usage: wristband admin reset-passkeys (--email EMAIL | --id ID | --dashboard-user NAME | --network-manager EMAIL)

For an account that lost its passkeys (a lost phone or security key, a wiped password manager, a
changed WEBAUTHN_RP_ID): removes every passkey of the account and revokes every refresh token and
dashboard session, so it signs in with its password (and TOTP code, when an administrator's MFA is on)
and registers a passkey again. Under PASSKEYS_REQUIRED_FOR an administrator is then asked to register
one at the next sign-in. No HTTP route removes a passkey without a fresh second factor. Recorded in the
audit log.

Options:
${SELECT_HELP}
  --dashboard-user NAME    or a dashboard user, by username
  --network-manager EMAIL  or a network manager, by e-mail address`,
  options: { ...selectOptions, 'dashboard-user': { type: 'string' }, 'network-manager': { type: 'string' } },
  async run(values, loadConfig) {
    const command = 'admin reset-passkeys'
    const user = stringOption(values, 'dashboard-user', command, true)
    const manager = stringOption(values, 'network-manager', command, true)?.toLowerCase()
    if (user === undefined && manager === undefined) {
      const selector = parseSelector(values, command)
      await withContext(loadConfig(), async (ctx) => {
        const target = { selector, command, kind: 'cli_admin_reset_passkeys', endSessions: true }
        const { admin, sessions } = await onAdmin(ctx, target, async (tx, a) => ({
          passkeys_removed: await removeAllPasskeys(
            tx,
            { kind: 'admin', id: a.id },
            { to: a.email, now: ctx.clock.now() },
          ),
        }))
        console.log(`passkeys reset for administrator ${admin.id} (${admin.email}); ${sessions}`)
      })
      return 0
    }
    const given = [values.email, values.id, user, manager].filter((v) => v !== undefined)
    if (given.length !== 1)
      throw new CliError(
        `wristband ${command}: give one of --email, --id, --dashboard-user, --network-manager (see --help)`,
      )
    const kind = user !== undefined ? 'dashboard_user' : 'network_manager'
    const name = (user ?? manager)!
    await withContext(loadConfig(), async (ctx) => {
      const result = await audited(ctx, 'cli_admin_reset_passkeys', async (tx) => {
        const account =
          user !== undefined
            ? await findDashboardUserSignIn(tx, user)
            : await findNetworkManagerSignIn(tx, name)
        if (!account) throw new CliError(`wristband ${command}: no ${kind.replace('_', ' ')} ${name}`, 1)
        const removed = await removeAllPasskeys(
          tx,
          { kind, id: account.id },
          kind === 'network_manager' ? { to: name, now: ctx.clock.now() } : undefined,
        )
        const ended = await ctx.authority.endSessions(tx, kind, account.id)
        return { ended, detail: { kind, id: account.id, name, passkeys_removed: removed } }
      })
      await result.ended.publish()
      console.log(
        `passkeys reset for ${kind.replace('_', ' ')} ${name}; ${result.ended.sessions} session(s) ended`,
      )
    })
    return 0
  },
}

const resetPassword: Subcommand = {
  summary: 'Set a new password for an administrator and end their sessions and tokens',
  usage: `Usage: wristband admin reset-password (--email EMAIL | --id ID) [--password-stdin]

Replaces the administrator's password as a reset by e-mail does: every unused reset link stops
working, every session and token of the administrator ends, and the administrator is e-mailed a
notice (sent by the running service). Passkeys stay (wristband admin reset-passkeys removes them).
Recorded in the audit log (never the password).

Options:
${SELECT_HELP}
${PASSWORD_HELP}`,
  options: { ...selectOptions, 'password-stdin': { type: 'boolean' } },
  async run(values, loadConfig) {
    const command = 'admin reset-password'
    const selector = parseSelector(values, command)
    const config = loadConfig()
    const { password, generated } = newPassword(values, command)
    const passwordHash = await hashPassword(password)
    await withContext(config, async (ctx) => {
      const result = await audited(ctx, 'cli_admin_reset_password', async (tx) => {
        const admin = await findAdmin(tx, selector, command)
        const ended = await changePassword(tx, ctx.authority, {
          owner: { kind: 'admin', id: admin.id, email: admin.email },
          passwordHash,
          way: 'command_line',
          now: ctx.clock.now(),
        })
        return { admin, ended, detail: { admin_id: admin.id, email: admin.email, tokens_ended: true } }
      })
      await result.ended.publish()
      const { admin, ended } = result
      console.log(
        `password reset for administrator ${admin.id} (${admin.email}); ${ended.sessions} session(s) ended, every token revoked, reset links retired, notice queued`,
      )
      if (generated) console.log(`password: ${password}`)
    })
    return 0
  },
}

const endTokens: Subcommand = {
  summary: 'End every token and session of an account (a lost laptop, a leaked token)',
  usage: `Usage: wristband admin end-tokens (EMAIL | --email EMAIL | --id ID | --network-manager EMAIL | --operator EMAIL)

Starts the account's next token generation: every access, refresh and offline token minted for it
so far (offline tokens for an event alone and those bound to a device alike) is refused by every
running instance within a second (REVOCATION_POLL_MS; at once with Redis), at /tokens/verify,
/tokens/check, /oauth2/introspect, /auth/refresh and the scanners' sync; its refresh tokens and
dashboard sessions end too. The password and passkeys stay: the account signs in again. Disabling an
administrator, resetting their password or MFA do the same. Recorded in the audit log.

Options:
  EMAIL                    an administrator's e-mail address (as --email)
${SELECT_HELP}
  --network-manager EMAIL  or a network manager, by e-mail address
  --operator EMAIL         or an operator, by e-mail address (the tokens of devices signed in as the
                           operator end too)`,
  options: { ...selectOptions, 'network-manager': { type: 'string' }, operator: { type: 'string' } },
  positionals: 1,
  async run(values, loadConfig, positionals) {
    const command = 'admin end-tokens'
    const manager = stringOption(values, 'network-manager', command, true)?.toLowerCase()
    const operator = stringOption(values, 'operator', command, true)?.toLowerCase()
    const given = [values.email, values.id, manager, operator, positionals[0]].filter((v) => v !== undefined)
    if (given.length !== 1)
      throw new CliError(
        `wristband ${command}: give one of EMAIL, --email, --id, --network-manager, --operator (see --help)`,
      )
    if (manager === undefined && operator === undefined) {
      const selector =
        positionals[0] !== undefined
          ? { email: positionals[0].trim().toLowerCase() }
          : parseSelector(values, command)
      await withContext(loadConfig(), async (ctx) => {
        const target = { selector, command, kind: 'cli_admin_end_tokens', endSessions: true }
        const { admin, sessions } = await onAdmin(ctx, target, async () => ({}))
        console.log(`tokens ended for administrator ${admin.id} (${admin.email}); ${sessions}`)
      })
      return 0
    }
    const kind = operator !== undefined ? 'operator' : 'network_manager'
    const email = (operator ?? manager)!
    await withContext(loadConfig(), async (ctx) => {
      const result = await audited(ctx, 'cli_admin_end_tokens', async (tx) => {
        const account =
          operator !== undefined
            ? await findOperatorByEmail(tx, email)
            : await findNetworkManagerSignIn(tx, email)
        if (!account) throw new CliError(`wristband ${command}: no ${kind.replace('_', ' ')} ${email}`, 1)
        const ended = await ctx.authority.endSessions(tx, kind, account.id)
        return { ended, detail: { kind, id: account.id, email, tokens_ended: true } }
      })
      await result.ended.publish()
      console.log(
        `tokens ended for ${kind.replace('_', ' ')} ${email}; ${result.ended.sessions} session(s) ended, every token revoked`,
      )
    })
    return 0
  },
}

export const adminCommands: CommandGroup = {
  name: 'admin',
  summary: 'Administrator accounts, and the passkeys and tokens of every staff account.',
  subcommands: {
    create,
    disable: setDisabled(1),
    enable: setDisabled(0),
    'reset-mfa': resetMfa,
    'reset-passkeys': resetPasskeys,
    'reset-password': resetPassword,
    'end-tokens': endTokens,
  },
}
