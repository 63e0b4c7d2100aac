import { WebSocket } from 'undici'

/** What `process.memoryUsage()` answers inside the inspected process. */
export interface MemoryUsage {
  rss: number
  heapTotal: number
  heapUsed: number
  external: number
  arrayBuffers: number
}

export interface Inspector {
  /** memoryUsage() of the process as it is, garbage included. */
  memory(): Promise<MemoryUsage>
  /** A full garbage collection (HeapProfiler.collectGarbage), then memoryUsage(): the live set. */
  settledMemory(): Promise<MemoryUsage>
  close(): void
}

/**
 * A DevTools-protocol session with a process started with `--inspect=127.0.0.1:<port>`: reads its
 * memory from the inside and can force a full GC, without `--expose-gc` or any change to its code.
 * Only the Runtime.evaluate and HeapProfiler.collectGarbage commands are sent; no domain is enabled,
 * so the debugger stays off and costs the process nothing between calls.
 */
export async function connectInspector(port: number): Promise<Inspector> {
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string
  }[]
  const url = list[0]?.webSocketDebuggerUrl
  if (!url) throw new Error(`no inspector target on port ${port}`)
  const ws = new WebSocket(url)
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true })
    ws.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), { once: true })
  })
  let id = 0
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  ws.addEventListener('message', (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } }
    if (msg.id === undefined) return
    const w = waiting.get(msg.id)
    waiting.delete(msg.id)
    if (msg.error) w?.reject(new Error(msg.error.message))
    else w?.resolve(msg.result)
  })
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const n = ++id
      waiting.set(n, { resolve, reject })
      ws.send(JSON.stringify({ id: n, method, params }))
    })
  const memory = async () => {
    const r = (await call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    })) as { result: { value: string } }
    return JSON.parse(r.result.value) as MemoryUsage
  }
  return {
    memory,
    async settledMemory() {
      await call('HeapProfiler.collectGarbage')
      return memory()
    },
    close: () => ws.close(),
  }
}
