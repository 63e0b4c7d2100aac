import http from 'node:http'
import { promisify } from 'node:util'
import zlib from 'node:zlib'

/** Each content encoding's decoder: on zlib's threads (`pool`), or on the calling thread (`here`). */
const decoders = {
  br: { pool: promisify(zlib.brotliDecompress), here: zlib.brotliDecompressSync },
  gzip: { pool: promisify(zlib.gunzip), here: zlib.gunzipSync },
}

/** Where a scanner syncs from, and how it names itself (an address per request, past per-address limits). */
export interface ScanTarget {
  origin: string
  address: () => string
  /**
   * Decode on the calling thread (a scanners' thread at a low priority: the decoding is the devices'
   * work), not on zlib's threads, which run at the process's priority.
   */
  decodeHere?: boolean
}

/**
 * A GET as a scanner makes it: the bytes as they came over the wire, and the body decoded (on zlib's
 * threads unless `target.decodeHere`).
 */
export function rawGet(target: ScanTarget, url: string, token: string, encoding: string) {
  return new Promise<{ status: number; wire: number; body: Buffer }>((resolve, reject) => {
    const req = http.get(
      `${target.origin}${url}`,
      {
        headers: {
          authorization: `Bearer ${token}`,
          'accept-encoding': encoding,
          'x-forwarded-for': target.address(),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('error', reject)
        res.on('end', () => {
          const raw = Buffer.concat(chunks)
          const enc = res.headers['content-encoding']
          const decoder = enc === 'br' || enc === 'gzip' ? decoders[enc] : undefined
          const decoded = !decoder
            ? Promise.resolve(raw)
            : target.decodeHere
              ? new Promise<Buffer>((ok) => ok(decoder.here(raw)))
              : decoder.pool(raw)
          decoded.then((body) => resolve({ status: res.statusCode ?? 0, wire: raw.length, body }), reject)
        })
      },
    )
    req.on('error', reject)
  })
}

/**
 * What a scanner reads of a compact page to go on: its count, cursor and has_more, found without
 * parsing the page (a 5,000-ticket page is 200 KB of JSON).
 */
function pageHead(body: Buffer) {
  const count = /"count":(\d+)/.exec(body.subarray(0, 4096).toString())
  const at = body.lastIndexOf('"cursor":')
  const tail = /^"cursor":"([\d.]+)","has_more":(true|false)/.exec(body.subarray(at, at + 64).toString())
  if (!count || !tail) throw new Error(`not a compact page: ${body.subarray(0, 200).toString()}`)
  return { count: Number(count[1]), cursor: tail[1]!, has_more: tail[2] === 'true' }
}

/** What a first sync asks: the event, the scanner's token, the encoding, and the tickets it must hold. */
export interface FirstSyncJob {
  event: number
  token: string
  encoding: string
  tickets: number
}

/** A scanner's first sync in the compact form, as `@wristband/scanner` takes it: the snapshot's pages, then the delta. */
export async function compactFirstSync(target: ScanTarget, job: FirstSyncJob) {
  let cursor: string | undefined
  let wire = 0
  let count = 0
  let pages = 0
  const started = performance.now()
  for (;;) {
    const res = await rawGet(
      target,
      `/events/${job.event}/scan-sync?format=columns${cursor ? `&cursor=${cursor}` : ''}`,
      job.token,
      job.encoding,
    )
    if (res.status !== 200)
      throw new Error(`compact first sync answered ${res.status}: ${res.body.subarray(0, 200).toString()}`)
    const page = pageHead(res.body)
    wire += res.wire
    pages++
    const inSnapshot = cursor === undefined || cursor.includes('.')
    if (inSnapshot) count += page.count
    cursor = page.cursor
    if (!page.has_more && !inSnapshot) break
  }
  if (count !== job.tickets)
    throw new Error(`the compact first sync held ${count} tickets, not ${job.tickets}`)
  return { ms: performance.now() - started, wire, pages }
}
