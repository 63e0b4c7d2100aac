import { randomUUID } from 'node:crypto'
import type { PartnerClient } from './client.js'
import { ConflictError, unwrap } from './errors.js'
import type { paths } from './generated/openapi.js'

type BatchBody = paths['/companies/transfers']['post']['requestBody']['content']['application/json']
type BatchAnswer = paths['/companies/transfers']['post']['responses'][200]['content']['application/json']

/** One transfer of `transferMany`: the body of POST /companies/transfer without `event_uid`. */
export type TransferItem = BatchBody['transfers'][number]
/** Its result: `status` 201 with `transfer`, or the status and `error` body of its refusal. */
export type TransferResult = BatchAnswer['results'][number]

export interface TransferManyOptions {
  /** Transfers per request, 1 to 500 (the service's most). Default 500. */
  chunkSize?: number
  /** Requests in flight at once. Default 2. */
  concurrency?: number
  /**
   * Names the run: chunk n goes out with `Idempotency-Key: <runId>:<n>`. To resume a run that stopped
   * (a crash, a network failure after the client's retries), call again with the same runId and the
   * same transfers in the same order: chunks already made are answered from the service's record (24
   * hours), not made again. Default: a new random UUID (no resuming).
   */
  runId?: string
  /** Told after each chunk: transfers answered so far, and in all. */
  onProgress?: (done: number, total: number) => void
  /** How to wait when a chunk's earlier attempt is still running (tests pass their own). */
  sleep?: (ms: number) => Promise<void>
}

const MAX_CHUNK = 500
/** A chunk whose earlier attempt is still being answered (409 idempotency_key_in_use) is asked again. */
const IN_USE_RETRIES = 10
const IN_USE_WAIT_MS = 1000

/**
 * Sends many transfers through POST /companies/transfers in chunks of up to 500, a few chunks at a
 * time, and answers one result per transfer in the order given. Each transfer is answered on its own:
 * a duplicate or an unknown ticket_uid is a result with its `status` and `error`, not an exception.
 * 429 and 503 are retried by the client (honouring Retry-After); a chunk that still fails throws, and
 * the run can be resumed by its `runId`.
 */
export async function transferMany(
  client: PartnerClient,
  eventUid: string,
  transfers: TransferItem[],
  opts: TransferManyOptions = {},
): Promise<TransferResult[]> {
  const size = opts.chunkSize ?? MAX_CHUNK
  if (!Number.isInteger(size) || size < 1 || size > MAX_CHUNK)
    throw new RangeError(`chunkSize must be 1 to ${MAX_CHUNK}`)
  const runId = opts.runId ?? randomUUID()
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)))
  const chunks: TransferItem[][] = []
  for (let i = 0; i < transfers.length; i += size) chunks.push(transfers.slice(i, i + size))
  const results: TransferResult[][] = new Array(chunks.length)
  let done = 0
  let next = 0
  async function send(n: number): Promise<TransferResult[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await unwrap(
          client.POST('/companies/transfers', {
            body: { event_uid: eventUid, transfers: chunks[n]! },
            params: { header: { 'idempotency-key': `${runId}:${n}` } },
          }),
        )
        return answer.results
      } catch (err) {
        if (
          !(err instanceof ConflictError && err.code === 'idempotency_key_in_use') ||
          attempt >= IN_USE_RETRIES
        )
          throw err
        await sleep(IN_USE_WAIT_MS)
      }
    }
  }
  async function worker() {
    while (next < chunks.length) {
      const n = next++
      results[n] = await send(n)
      done += chunks[n]!.length
      opts.onProgress?.(done, transfers.length)
    }
  }
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 2, chunks.length) }, worker))
  return results.flat()
}
