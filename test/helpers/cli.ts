import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { startApp, TEST_SECRET, type TestApp } from './app.js'
import type { Backend, ProvisionedBackend } from './backends.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** The installed command: bin/wristband.js runs the compiled program in dist/ (the test runner builds it). */
export const BIN = path.join(ROOT, 'bin', 'wristband.js')

export interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * Runs the real command line in its own process with only the given environment, in DATA_DIR when
 * given and a folder (else a fresh folder, so no stray .env is read).
 */
export function wristband(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    // A DATA_DIR that is no folder (a start-up test's) cannot be the working directory either.
    const own =
      env.DATA_DIR === undefined || !fs.statSync(env.DATA_DIR, { throwIfNoEntry: false })?.isDirectory()
    const cwd = own ? fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-cli-')) : env.DATA_DIR!
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => {
      stdout += d
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.on('error', reject)
    child.on('close', (code) => {
      if (own) fs.rmSync(cwd, { recursive: true, force: true })
      resolve({ code, stdout, stderr })
    })
    child.stdin.end(input ?? '')
  })
}

/** The environment in which the command line works on a provisioned backend's storage, beside a test instance. */
export function cliEnv(p: ProvisionedBackend): Record<string, string> {
  return { ...p.env, JWT_SECRET: TEST_SECRET, NODE_ENV: 'test', LOG_LEVEL: 'warn' }
}

/** The standard output of a run that exited 0; fails with the exit code and both outputs otherwise. */
export function ok(run: Run): string {
  assert.equal(run.code, 0, `exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`)
  return run.stdout
}

/** A test instance and the command line's environment on one storage: the instance sees what a command writes. */
export interface AppWithCli {
  t: TestApp
  env: Record<string, string>
  /** Stops the instance and disposes of the storage. */
  close(): Promise<void>
}

export async function startAppWithCli(backend: Backend): Promise<AppWithCli> {
  const p = await backend.provision()
  const t = await startApp(backend, {}, p)
  return {
    t,
    env: cliEnv(p),
    async close() {
      await t.close()
      await p.dispose()
    },
  }
}
