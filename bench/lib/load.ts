import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import autocannon, { type Request } from 'autocannon'
import { track } from './processes.js'

const run = promisify(execFile)

export type Tool = 'wrk' | 'autocannon'

/**
 * One request of a static load: the client address (X-Forwarded-For), the JSON body (none when empty)
 * and other headers (GET /tokens/check's Authorization and api_key).
 */
export interface Entry {
  address: string
  body: string
  headers?: Record<string, string>
}

/** Requests known in advance, sent round-robin; either load generator can send them. */
export interface StaticLoad {
  kind: 'static'
  method: 'POST' | 'GET'
  path: string
  entries: Entry[]
}

/** An entry's headers besides X-Forwarded-For: its own, and the JSON content type when it has a body. */
function headersOf(e: Entry): Record<string, string> {
  return { ...(e.body === '' ? {} : { 'content-type': 'application/json' }), ...e.headers }
}

/** Requests built from earlier answers (refresh-token rotation); only autocannon can send them. */
export interface DynamicLoad {
  kind: 'dynamic'
  request: Request
}

export type Load = StaticLoad | DynamicLoad

export interface Measurement {
  tool: Tool
  requests: number
  seconds: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** Answers other than 2xx (a 429 here would mean the spread of addresses is too thin). */
  non2xx: number
  /** Connection errors and timeouts. */
  errors: number
  /** CPU seconds the server used during the run (all its threads; it is alone on its CPU). */
  serverCpu: number
}

type Raw = Omit<Measurement, 'serverCpu'>

// One request table per load, built once in wrk's init(); request() only picks the next entry, so the
// client spends as little as possible per request. A line of the entries file: the address, a tab, the
// headers (`name: value`, separated by the byte 0x1f), a tab, the body (empty: none).
const WRK_SCRIPT = `
local reqs = {}
local n = 0
local i = 0

function init(args)
  for line in io.lines(args[3]) do
    local tab = string.find(line, "\\t", 1, true)
    local tab2 = string.find(line, "\\t", tab + 1, true)
    local headers = { ["X-Forwarded-For"] = string.sub(line, 1, tab - 1) }
    for h in string.gmatch(string.sub(line, tab + 1, tab2 - 1), "[^\\31]+") do
      local colon = string.find(h, ": ", 1, true)
      headers[string.sub(h, 1, colon - 1)] = string.sub(h, colon + 2)
    end
    local body = string.sub(line, tab2 + 1)
    if body == "" then body = nil end
    n = n + 1
    reqs[n] = wrk.format(args[1], args[2], headers, body)
  end
end

function request()
  i = i % n + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"p50_us":%.0f,"p99_us":%.0f,' ..
    '"errors":%d,"status":%d}\\n', summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.timeout, e.status))
end
`

export class LoadGenerator {
  private readonly files = new WeakMap<StaticLoad, string>()
  private counter = 0

  constructor(
    readonly preferred: Tool,
    private readonly workDir: string,
  ) {}

  toolFor(load: Load): Tool {
    return load.kind === 'dynamic' ? 'autocannon' : this.preferred
  }

  async measure(
    server: { origin: string; cpu(): number },
    load: Load,
    connections: number,
    seconds: number,
    tool: Tool = this.toolFor(load),
  ): Promise<Measurement> {
    const before = server.cpu()
    const raw =
      tool === 'wrk' && load.kind === 'static'
        ? await this.wrk(server.origin, load, connections, seconds)
        : await this.autocannon(server.origin, load, connections, seconds)
    return { ...raw, serverCpu: server.cpu() - before }
  }

  private entriesFile(load: StaticLoad): string {
    let file = this.files.get(load)
    if (!file) {
      file = path.join(this.workDir, `load-${++this.counter}.tsv`)
      const line = (e: Entry) => {
        const headers = Object.entries(headersOf(e)).map(([name, value]) => `${name}: ${value}`)
        return `${e.address}\t${headers.join('\x1f')}\t${e.body}`
      }
      fs.writeFileSync(file, `${load.entries.map(line).join('\n')}\n`)
      this.files.set(load, file)
    }
    return file
  }

  private async wrk(origin: string, load: StaticLoad, connections: number, seconds: number): Promise<Raw> {
    const script = path.join(this.workDir, 'load.lua')
    if (!fs.existsSync(script)) fs.writeFileSync(script, WRK_SCRIPT)
    const args = ['-c', '1', 'wrk', '-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s']
    args.push('-s', script, `${origin}${load.path}`, '--', load.method, load.path, this.entriesFile(load))
    const running = run('taskset', args, { maxBuffer: 1 << 20 })
    track(running.child)
    const { stdout } = await running
    const line = stdout.split('\n').find((l) => l.startsWith('BENCH '))
    if (!line) throw new Error(`wrk printed no result:\n${stdout}`)
    const r = JSON.parse(line.slice(6)) as Record<string, number>
    const secs = r.duration_us! / 1e6
    return {
      tool: 'wrk' as const,
      requests: r.requests!,
      seconds: secs,
      rps: r.requests! / secs,
      p50Ms: r.p50_us! / 1000,
      p99Ms: r.p99_us! / 1000,
      non2xx: r.status!,
      errors: r.errors!,
    }
  }

  private async autocannon(origin: string, load: Load, connections: number, seconds: number): Promise<Raw> {
    let request: Request
    if (load.kind === 'dynamic') request = load.request
    else {
      let i = 0
      const { entries, method, path: p } = load
      request = {
        method,
        path: p,
        setupRequest: (req) => {
          const e = entries[i++ % entries.length]!
          return {
            ...req,
            headers: { ...headersOf(e), 'x-forwarded-for': e.address },
            ...(e.body === '' ? {} : { body: e.body }),
          }
        },
      }
    }
    const r = await autocannon({
      url: origin,
      connections,
      duration: seconds,
      timeout: 10,
      requests: [request],
    })
    return {
      tool: 'autocannon' as const,
      requests: r.requests.total,
      seconds: r.duration,
      rps: r.requests.total / r.duration,
      p50Ms: r.latency.p50,
      p99Ms: r.latency.p99,
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
    }
  }
}
