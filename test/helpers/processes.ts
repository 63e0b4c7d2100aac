import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { until } from './until.js'

/** A port nobody listens on right now, for a child process to take. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

export const redisServerInstalled = spawnSync('redis-server', ['--version']).status === 0

export const redisSentinelInstalled = spawnSync('redis-sentinel', ['--version']).status === 0

/** Waits until a Redis server or sentinel on `port` answers PING (with `password` when it needs one). */
async function untilRedisAnswers(what: string, port: number, password?: string): Promise<void> {
  await until(`${what} to accept connections`, async () => {
    const probe = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      retryStrategy: () => null,
      ...(password ? { password } : {}),
    })
    probe.on('error', () => {})
    try {
      await probe.connect()
      return (await probe.ping()) === 'PONG'
    } catch {
      return false
    } finally {
      probe.disconnect()
    }
  })
}

/** Starts `command`, waits until it answers on `port`, and kills it if it never does. */
async function startAnswering(
  command: string,
  args: string[],
  port: number,
  password?: string,
): Promise<ChildProcess> {
  const child = spawn(command, args, { stdio: 'ignore' })
  try {
    await untilRedisAnswers(command, port, password)
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
  return child
}

/**
 * A Redis server of our own without persistence, so killing it and starting it again loses every key.
 * `extra` adds arguments (`--replicaof`, `--requirepass`); `password` is what the start-up probe sends.
 */
export async function startRedisServer(
  port: number,
  extra: string[] = [],
  password?: string,
): Promise<ChildProcess> {
  // A folder of its own: a replica's full sync writes dump.rdb there even without `save` (it was the
  // working directory, the repository's root).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-redis-'))
  const server = await startAnswering(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...extra,
    ],
    port,
    password,
  )
  server.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  return server
}

/**
 * A Redis Sentinel of our own on `port`: its configuration file (which a sentinel rewrites as it
 * learns) and log go into `dir`; `lines` are its `sentinel …` directives, `password` its requirepass.
 */
export function startRedisSentinel(
  port: number,
  dir: string,
  lines: string[],
  password?: string,
): Promise<ChildProcess> {
  const file = path.join(dir, `sentinel-${port}.conf`)
  fs.writeFileSync(
    file,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `logfile ${path.join(dir, `sentinel-${port}.log`)}`,
      ...(password ? [`requirepass ${password}`] : []),
      ...lines,
      '',
    ].join('\n'),
  )
  return startAnswering('redis-sentinel', [file], port, password)
}

/** PgBouncer's binary (Debian installs it in /usr/sbin, which a user's PATH may lack), or undefined. */
export const pgbouncerBinary = ['pgbouncer', '/usr/sbin/pgbouncer'].find(
  (bin) => spawnSync(bin, ['--version']).status === 0,
)

/**
 * A PgBouncer of our own on `port`, in transaction mode, its configuration and log in `dir`.
 * `databases` are the lines of its [databases] section, `settings` further lines of [pgbouncer];
 * clients log in as anyone (`auth_type = any`: each entry names the server's user), and the service's
 * startup parameters it cannot pass on (search_path in `options`, statement_timeout) are accepted and
 * dropped, as a deployment must configure it. PgBouncer refuses to run as root: as root it is started
 * as `nobody`, who is given the folder.
 */
export async function startPgBouncer(
  port: number,
  dir: string,
  databases: string[],
  settings: string[],
): Promise<ChildProcess> {
  const file = path.join(dir, 'pgbouncer.ini')
  fs.writeFileSync(
    file,
    [
      '[databases]',
      ...databases,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      'ignore_startup_parameters = options, statement_timeout',
      ...settings,
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
  )
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const nobody = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' })
    fs.chownSync(dir, Number(nobody.stdout.trim()), -1)
  }
  const child = spawn(pgbouncerBinary!, [...(asRoot ? ['-u', 'nobody'] : []), file], { stdio: 'ignore' })
  try {
    await until('pgbouncer to accept connections', async () => {
      const probe = net.connect(port, '127.0.0.1')
      return new Promise<boolean>((resolve) => {
        probe.once('connect', () => resolve(true)).once('error', () => resolve(false))
      }).finally(() => probe.destroy())
    })
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
  return child
}

/** SIGKILLs a child process (if still running) and waits until it is gone. */
export async function killProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
}

/**
 * A child process whose output is JSON log lines (the service's): the lines as they arrive, a way to
 * wait for one, and its exit code. Lines that are not JSON are kept as `{ msg: line }`; standard
 * error is kept as text.
 */
export class LoggedProcess {
  readonly lines: Record<string, unknown>[] = []
  stderr = ''
  private waiters: { match: (l: Record<string, unknown>) => boolean; resolve: () => void }[] = []
  readonly exited: Promise<number | null>

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (raw) => {
      let line: Record<string, unknown>
      try {
        line = JSON.parse(raw)
      } catch {
        line = { msg: raw }
      }
      this.lines.push(line)
      const met = this.waiters.filter((w) => w.match(line))
      this.waiters = this.waiters.filter((w) => !met.includes(w))
      for (const w of met) w.resolve()
    })
    child.stderr?.on('data', (d) => {
      this.stderr += d
    })
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  }

  waitFor(match: (l: Record<string, unknown>) => boolean): Promise<void> {
    if (this.lines.some(match)) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push({ match, resolve }))
  }
}

/** Whether a process id is still running (or at least not yet reaped). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
