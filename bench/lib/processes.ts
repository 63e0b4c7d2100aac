import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'

/** Every child the bench starts, so that any way out of the run (error, Ctrl-C, time limit) ends them. */
const children = new Set<ChildProcess>()

/** Adds a child to those ended however the bench ends (until it exits by itself). */
export function track(child: ChildProcess): void {
  children.add(child)
  child.once('exit', () => children.delete(child))
}

export function killAll(): void {
  for (const child of children) child.kill('SIGKILL')
  children.clear()
}

/** Storage clean-up (schemas, Redis keys, folders) still pending, for when the run is cut short. */
const cleanups = new Set<() => Promise<void>>()

/** Registers clean-up to run if the bench is interrupted; returns the function that unregisters it. */
export function onAbort(fn: () => Promise<void>): () => void {
  cleanups.add(fn)
  return () => cleanups.delete(fn)
}

/** Kills every child, runs the pending clean-up (for at most 10 s) and exits with `code`. */
export async function abort(code: number): Promise<never> {
  killAll()
  const pending = [...cleanups]
  cleanups.clear()
  await Promise.race([Promise.allSettled(pending.map((fn) => fn())), sleep(10_000)])
  process.exit(code)
}

/**
 * Pins the calling process (every thread it has, and so every one it starts) to one CPU, and gives it
 * and every server it starts the scheduling priority `nice` (negative: ahead of other work on a shared
 * machine; needs privileges).
 */
export function pinSelf(cpu: number, nice = 0): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' })
  if (nice !== 0) os.setPriority(nice)
}

export function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100

/** Resident memory of a process in bytes (VmRSS from /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]
  return kb === undefined ? 0 : Number(kb) * 1024
}

/** The processes whose parent is `pid` (node:cluster workers of a primary), from /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid) out.push(Number(entry))
    } catch {
      // exited while we looked
    }
  }
  return out
}

/** CPU time (user + system, all threads) a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name may hold spaces; the fields after its closing parenthesis are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
}

export interface Pinned {
  child: ChildProcess
  /** CPU seconds the process has used so far. */
  cpu(): number
  /** What the process wrote on stderr so far, for error messages. */
  stderr(): string
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>
}

/**
 * Starts `node args…` pinned to `cpu` (a CPU number, or a taskset list such as `0,1`) with `env`;
 * stdout is discarded (see the README: logs).
 */
export function spawnPinned(
  cpu: number | string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
): Pinned {
  // The child inherits the bench's own priority (see pinSelf).
  const child = spawn('taskset', ['-c', String(cpu), process.execPath, ...args], {
    env,
    cwd,
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  track(child)
  let err = ''
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4000)
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {
    child,
    cpu: () => cpuSeconds(child.pid!),
    stderr: () => err,
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(timer)
    },
  }
}

/** Polls `url` until it answers 200, the process dies, or `timeoutMs` passes. */
export async function waitForHttp(url: string, proc: Pinned, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) {
      throw new Error(`server exited with code ${proc.child.exitCode} before answering:\n${proc.stderr()}`)
    }
    try {
      const res = await fetch(url)
      await res.arrayBuffer()
      if (res.ok) return
    } catch {
      // not listening yet
    }
    await sleep(100)
  }
  throw new Error(`no answer from ${url} within ${timeoutMs} ms:\n${proc.stderr()}`)
}

/** A positive number from the environment, or `def` when unset; anything else stops the bench. */
export function envNumber(name: string, def: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return def
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`)
  return n
}

/**
 * What every bench script sets up first: it stops (children killed, clean-up run) after `seconds`,
 * on Ctrl-C or SIGTERM, and kills its children however the process exits.
 */
export function guardRun(name: string, seconds: number): void {
  const limit = setTimeout(() => {
    console.error(`${name}: time limit of ${seconds} s reached; stopping`)
    void abort(1)
  }, seconds * 1000)
  limit.unref()
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void abort(130))
  process.on('exit', killAll)
}
