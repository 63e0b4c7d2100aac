import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { killProcess } from './processes.js'
import { until } from './until.js'

/** The installed command: bin/wristband.js runs the compiled program in dist/ (the test runner builds it). */
const BIN = fileURLToPath(new URL('../../bin/wristband.js', import.meta.url))

/**
 * The real service (`wristband serve --workers 1`) as a child process on its own port, which can be
 * killed and started again on the same storage. One worker, so a SIGKILL takes the whole service down.
 */
export class ServiceProcess {
  private child: ChildProcess | undefined
  /** Everything the process wrote, for the message of a failed assertion. */
  output = ''

  constructor(
    readonly port: number,
    private readonly env: Record<string, string>,
    private readonly cwd: string,
    /** The command to run: this checkout's by default, another release's for the rollback test. */
    private readonly bin: string = BIN,
  ) {}

  get origin(): string {
    return `http://127.0.0.1:${this.port}`
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  /** Starts the process and resolves once it answers /health; fails when it exits first (or after 2 minutes: a bound on a hang on a busy machine). */
  async start(): Promise<void> {
    const child = spawn(process.execPath, [this.bin, 'serve', '--workers', '1'], {
      cwd: this.cwd,
      env: { PATH: process.env.PATH ?? '', ...this.env, HOST: '127.0.0.1', PORT: String(this.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child = child
    const keep = (d: Buffer) => {
      this.output = (this.output + d).slice(-20_000)
    }
    child.stdout!.on('data', keep)
    child.stderr!.on('data', keep)
    await until(
      `the service on port ${this.port} to answer /health`,
      async () => {
        if (child.exitCode !== null)
          throw new Error(`the service exited (${child.exitCode}):\n${this.output}`)
        try {
          return (await fetch(`${this.origin}/health`)).status === 200
        } catch {
          return false
        }
      },
      120_000,
    )
  }

  /** SIGKILL: no drain, no shutdown hooks, whatever was in flight is cut. */
  async kill(): Promise<void> {
    if (this.child) await killProcess(this.child)
  }

  /** SIGTERM: the documented graceful stop. Resolves with the exit code (null when already gone). */
  async stop(): Promise<number | null> {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return null
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    return exited
  }

  /** Resident memory of the process in bytes (Linux /proc), or undefined elsewhere. */
  rss(): number | undefined {
    if (!this.child?.pid) return undefined
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${this.child.pid}/status`, 'utf8'))
      return m ? Number(m[1]) * 1024 : undefined
    } catch {
      return undefined
    }
  }
}
