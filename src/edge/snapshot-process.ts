// The child process that builds a first-sync snapshot (snapshots.ts): it is sent the job, opens its own
// connection, writes the snapshot's file and reports each page; its memory goes with it when it ends.
import os from 'node:os'
import { childTask } from '../platform/child-task.js'
import type { BuildGo, BuildMessage, SnapshotProcessJob } from './snapshot-file.js'

// Before the modules load (the job is listened for at once). The service gone (killed, crashed) closes
// the channel, and nobody will read the snapshot: the build ends at once, its connection with it, and
// deletes its file rather than fill the disk for no one.
const task = childTask<SnapshotProcessJob>()

// A lower priority, set before anything else is loaded and before the threads that compress start
// (they inherit it): the service's requests at the gate come first, and the build takes what they leave.
try {
  os.setPriority(10)
} catch {
  // Not permitted here: the build runs at the service's priority.
}
const { openDatabase } = await import('../platform/db/database.js')
const { writeSnapshot } = await import('./snapshot-file.js')

const job = await task.job
task.owns(job.file)
// Two connections: the next page is gathered while a ticket type made meanwhile is looked up.
const handle = await openDatabase(job.databaseUrl, { schema: job.schema, poolSize: 2 })
try {
  let sent = Promise.resolve()
  // Each read waits for the service's `go` (one for each `quiet` asked, in order).
  const goes: ((busy: boolean) => void)[] = []
  process.on('message', (go: BuildGo) => goes.shift()?.(go.busy))
  await writeSnapshot(
    handle,
    job,
    (page) => {
      // In order, each once the one before has left (none lost at the end).
      sent = sent.then(() => task.send(page satisfies BuildMessage))
    },
    () =>
      new Promise<boolean>((resolve) => {
        goes.push(resolve)
        sent = sent.then(() => task.send({ quiet: true } satisfies BuildMessage))
      }),
  )
  await sent
} finally {
  await handle.close()
}
task.done()
process.disconnect()
