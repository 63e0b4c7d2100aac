// autocannon ships no type declarations; this covers the part of its API the bench uses.
declare module 'autocannon' {
  export interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    setupRequest?: (req: Request, context: Record<string, unknown>) => Request | null
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void
  }
  export interface Options {
    url: string
    connections?: number
    duration?: number
    /** Stop after this many requests instead of after `duration`. */
    amount?: number
    /** Requests per second across all connections (a fixed rate instead of as fast as possible). */
    overallRate?: number
    pipelining?: number
    timeout?: number
    requests?: Request[]
  }
  interface Histogram {
    average: number
    mean: number
    p50: number
    p90: number
    p99: number
    p99_9: number
    max: number
    total: number
  }
  export interface Result {
    requests: Histogram
    latency: Histogram
    duration: number
    errors: number
    timeouts: number
    non2xx: number
    '2xx': number
  }
  export default function autocannon(opts: Options): Promise<Result>
}
