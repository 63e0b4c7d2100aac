import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

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
 * given (else a fresh folder, so no stray .env is read).
 */
export function wristband(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const own = env.DATA_DIR === undefined
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
