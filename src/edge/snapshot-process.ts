// The child process that builds a first-sync snapshot (snapshots.ts): it is sent the job, opens its own
// connection, writes the snapshot's file and reports each page; its memory goes with it when it ends.
import { rmSync } from 'node:fs'
import os from 'node:os'
import type { PageExtent, SnapshotProcessJob } from './snapshot-file.js'

// The job, listened for at once (a message sent before a listener is there would be lost).
const sentJob = new Promise<SnapshotProcessJob>((resolve) => process.once('message', resolve))
// The service gone (killed, crashed): its channel closes, and nobody will read the snapshot. The build
// ends at once, its connection with it, and deletes its file rather than fill the disk for no one.
let file: string | undefined
let finished = false
process.once('disconnect', () => process.exit(0))
process.once('exit', () => {
  if (!finished && file) rmSync(file, { force: true })
})

// A lower priority, set before anything else is loaded and before the threads that compress start
// (they inherit it): the service's requests at the gate come first, and the build takes what they leave.
try {
  os.setPriority(10)
} catch {
  // Not permitted here: the build runs at the service's priority.
}
const { openDatabase } = await import('../platform/db/database.js')
const { writeSnapshot } = await import('./snapshot-file.js')

/** Resolves once the page's message has left (the pages are reported in order, none lost at the end). */
const report = (page: PageExtent) =>
  new Promise<void>((resolve, reject) =>
    process.send!(page, undefined, {}, (err) => (err ? reject(err) : resolve())),
  )

const job = await sentJob
file = job.file
const handle = await openDatabase(job.databaseUrl, { schema: job.schema, poolSize: 1 })
try {
  let sent = Promise.resolve()
  await writeSnapshot(handle.db, job, (page) => {
    sent = sent.then(() => report(page))
  })
  await sent
} finally {
  await handle.close()
}
finished = true
process.disconnect()
