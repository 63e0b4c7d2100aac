import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** The machine a result was measured on, with its load average when the run started. */
export function machineLine(): string {
  const cpus = os.cpus()
  const load = os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')
  return `Machine: ${cpus[0]?.model ?? 'unknown'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GB, Node ${process.version}, ${os.type()} ${os.release()}; load average ${load} at the start.`
}

export const f0 = (n: number) => Math.round(n).toLocaleString('en-US')
export const f1 = (n: number) => n.toFixed(1)
export const f2 = (n: number) => n.toFixed(2)
export const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1)

/** A Markdown table from a header row and rows of cells (numbers right-aligned). */
export function table(header: string[], rows: (string | number)[][], right: boolean[] = []): string[] {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map((_, i) => (right[i] ? '--:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ]
}

/** Writes bench/results/<name>.md and .json. */
export function writeResults(name: string, md: string, json: unknown): void {
  const dir = fileURLToPath(new URL('../results/', import.meta.url))
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `${name}.md`), md.endsWith('\n') ? md : `${md}\n`)
  fs.writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`)
  console.log(`\nwrote bench/results/${name}.md and bench/results/${name}.json`)
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}
