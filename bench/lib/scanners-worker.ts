// The scanners of a round of first syncs, on a thread of their own: a gate's scanners are other
// devices, so their reading of the pages (160 MB a round of four at a million tickets) must not run on
// the event loop that times the ticket uses. Each message is one round: every job at once, answered
// with their times (or the first error).
import os from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { compactFirstSync, type FirstSyncJob } from './scan-client.js'

// This thread only, at the lowest priority (Linux gives each thread its own): it shares the bench's
// core with the thread that times the gate's ticket uses, which on a device of its own would not wait
// behind the scanners' reading. The scanners still read as fast (SQLite at 1M: the slowest of four
// 5.9 s niced, 6.0 s not), and the service serves them as before; what no longer counts in a use's time
// is the bench's own scanners' turn on its core (its p95 during the syncs 19.9 ms niced, 22.7 ms not).
try {
  os.setPriority(19)
} catch {
  // Not permitted: the scanners run at the bench's priority.
}

let addresses = 0
const target = {
  origin: (workerData as { origin: string }).origin,
  // Addresses of their own (11.x.x.x), apart from the bench thread's (10.x.x.x).
  address: () => {
    addresses++
    return `11.${(addresses >> 16) & 255}.${(addresses >> 8) & 255}.${addresses & 255}`
  },
  decodeHere: true,
}

parentPort!.on('message', (jobs: FirstSyncJob[]) => {
  Promise.all(jobs.map((job) => compactFirstSync(target, job))).then(
    (results) => parentPort!.postMessage({ results }),
    (err: unknown) => parentPort!.postMessage({ error: String(err) }),
  )
})
