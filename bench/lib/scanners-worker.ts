// The scanners of a round of first syncs, on a thread of their own: a gate's scanners are other
// devices, so their reading of the pages (160 MB a round of four at a million tickets) must not run on
// the event loop that times the ticket uses. Each message is one round: every job at once, answered
// with their times (or the first error).
import { parentPort, workerData } from 'node:worker_threads'
import { compactFirstSync, type FirstSyncJob } from './scan-client.js'

let addresses = 0
const target = {
  origin: (workerData as { origin: string }).origin,
  // Addresses of their own (11.x.x.x), apart from the bench thread's (10.x.x.x).
  address: () => {
    addresses++
    return `11.${(addresses >> 16) & 255}.${(addresses >> 8) & 255}.${addresses & 255}`
  },
}

parentPort!.on('message', (jobs: FirstSyncJob[]) => {
  Promise.all(jobs.map((job) => compactFirstSync(target, job))).then(
    (results) => parentPort!.postMessage({ results }),
    (err: unknown) => parentPort!.postMessage({ error: String(err) }),
  )
})
