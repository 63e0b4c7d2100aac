import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client'
import type { Metrics, Scrape } from './metrics.js'

/**
 * `/metrics` under `serve --workers N`. A scrape reaches one worker (they share the port), so that
 * worker asks the primary, which collects every worker's values and sums them with prom-client's
 * AggregatorRegistry (gauges of a shared table, like the outbox depth, take the maximum instead).
 *
 *   worker  --scrape-->  primary  --snapshot-->  every worker
 *   worker  <--text---   primary  <--values----  every worker
 */

const SCRAPE = 'wristband:metrics:scrape'
const SCRAPED = 'wristband:metrics:scraped'
const SNAPSHOT = 'wristband:metrics:snapshot'
const SNAPSHOT_TAKEN = 'wristband:metrics:snapshot-taken'

/** A worker that does not answer within this is left out of the scrape rather than failing it. */
const WORKER_TIMEOUT_MS = 3000

type Values = MetricObjectWithValues<MetricValue<string>>[]

interface Message {
  type?: unknown
  id?: unknown
  body?: string
  contentType?: string
  values?: Values
  error?: string
}

function isMessage(m: unknown, type: string): m is Message & { id: number } {
  return (
    typeof m === 'object' &&
    m !== null &&
    (m as Message).type === type &&
    typeof (m as Message).id === 'number'
  )
}

/** In a worker: answers the primary's snapshot requests, and routes this instance's scrapes through it. */
export function shareWorkerMetrics(metrics: Metrics, proc: NodeJS.Process = process): void {
  const send = proc.send?.bind(proc)
  if (!send) return
  let next = 0
  const pending = new Map<number, { resolve(s: Scrape): void; reject(e: Error): void }>()
  proc.on('message', (m: unknown) => {
    if (isMessage(m, SNAPSHOT)) {
      metrics.snapshot().then(
        (values) => send({ type: SNAPSHOT_TAKEN, id: m.id, values }),
        (err: Error) => send({ type: SNAPSHOT_TAKEN, id: m.id, error: err.message }),
      )
    } else if (isMessage(m, SCRAPED)) {
      const waiter = pending.get(m.id)
      pending.delete(m.id)
      if (!waiter) return
      if (m.error !== undefined) waiter.reject(new Error(m.error))
      else waiter.resolve({ body: m.body ?? '', contentType: m.contentType ?? '' })
    }
  })
  metrics.scrapeThrough(
    () =>
      new Promise<Scrape>((resolve, reject) => {
        const id = next++
        pending.set(id, { resolve, reject })
        send({ type: SCRAPE, id })
      }),
  )
}

/** In the primary: answers each worker's scrape with the values of all workers, summed. */
export function aggregateWorkerMetrics(): void {
  let next = 0
  const snapshots = new Map<number, (values: Values | undefined) => void>()

  const snapshotOf = (worker: Worker) =>
    new Promise<Values | undefined>((resolve) => {
      const id = next++
      const timer = setTimeout(() => {
        snapshots.delete(id)
        resolve(undefined)
      }, WORKER_TIMEOUT_MS)
      snapshots.set(id, (values) => {
        clearTimeout(timer)
        snapshots.delete(id)
        resolve(values)
      })
      worker.send({ type: SNAPSHOT, id })
    })

  const answer = async (asker: Worker, id: number) => {
    try {
      const workers = Object.values(cluster.workers ?? {}).filter(
        (w): w is Worker => w?.isConnected() === true,
      )
      const values = (await Promise.all(workers.map(snapshotOf))).filter((v): v is Values => v !== undefined)
      // prom-client omits the start time from a cluster's sum (a sum of times means nothing); the
      // earliest worker's start is what an operator asks: since when has the service been up.
      for (const worker of values)
        for (const metric of worker)
          if (metric.name === 'process_start_time_seconds') metric.aggregator = 'min'
      const registry = AggregatorRegistry.aggregate(values)
      asker.send({ type: SCRAPED, id, body: await registry.metrics(), contentType: registry.contentType })
    } catch (err) {
      asker.send({ type: SCRAPED, id, error: (err as Error).message })
    }
  }

  cluster.on('message', (worker, m: unknown) => {
    if (isMessage(m, SNAPSHOT_TAKEN)) snapshots.get(m.id)?.(m.error === undefined ? m.values : undefined)
    else if (isMessage(m, SCRAPE)) void answer(worker, m.id)
  })
}
