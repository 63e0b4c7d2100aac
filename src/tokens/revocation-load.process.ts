// The child process that loads the revocation list when an instance starts (revocations.ts): it is sent
// the request, reads every live revocation on its own connection into sorted arrays, writes them to the
// request's file and answers with their size and the account ends. What the reading makes and drops (a
// string a page, a million entries' worth) goes with the process; in the service's own heap, or a worker
// thread's, it stayed as grown memory for good.
import fs from 'node:fs'
import { childTask } from '../platform/child-task.js'
import type { RevocationLoadAnswer, RevocationLoadRequest } from './revocations.js'

// Before the modules load (the request is listened for at once); the service gone ends the child and
// takes its file (if written) along.
const task = childTask<RevocationLoadRequest>()
const { openDatabase } = await import('../platform/db/database.js')
const { RevocationSetBuilder } = await import('./revocation-set.js')
const { readLiveRevocations } = await import('./revocations.store.js')

const request = await task.job
const send = (message: RevocationLoadAnswer | { error: string }) => task.send(message)
try {
  const handle = await openDatabase(request.url, { schema: request.schema, poolSize: 1 })
  try {
    const builder = new RevocationSetBuilder()
    const accounts: [string, number][] = []
    await readLiveRevocations(
      handle.db,
      request.now,
      request.pageSize,
      builder,
      request.prefix,
      (jti, at) => accounts.push([jti, at]),
      undefined,
      undefined,
      request.first,
    )
    const count = builder.length
    const sorted = builder.build(Math.floor(request.now / 1000))
    const fd = fs.openSync(request.file, 'wx', 0o600)
    task.owns(request.file)
    try {
      for (const a of [sorted.hi, sorted.lo, sorted.exp]) {
        const bytes = new Uint8Array(a.buffer)
        for (let at = 0; at < bytes.byteLength; ) at += fs.writeSync(fd, bytes, at)
      }
    } finally {
      fs.closeSync(fd)
    }
    await send({ entries: sorted.hi.length, count, accounts })
    task.done()
  } finally {
    await handle.close()
  }
} catch (err) {
  // Told to the service, which logs it in one line and reads the list itself; a service gone (the
  // answer's write failed) is told nothing, and the child ends.
  await send({ error: (err as Error).message }).catch(() => process.exit(0))
}
process.disconnect()
