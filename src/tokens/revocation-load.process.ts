// The child process that loads the revocation list when an instance starts (revocations.ts): it is sent
// the request, reads every live revocation on its own connection into sorted arrays, writes them to the
// request's file and answers with their size and the account ends. What the reading makes and drops (a
// string a page, a million entries' worth) goes with the process; in the service's own heap, or a worker
// thread's, it stayed as grown memory for good.
import fs from 'node:fs'
import type { RevocationLoadAnswer, RevocationLoadRequest } from './revocations.js'

// The request, listened for at once (a message sent before a listener is there would be lost).
const sentRequest = new Promise<RevocationLoadRequest>((resolve) => process.once('message', resolve))
// The service gone before the answer reached it (killed, crashed): its channel closes. The load is of
// no use to anyone then; it ends at once, its connection with it, and takes its file (if written) along,
// as it does on any end before its answer was sent.
let file: string | undefined
let answered = false
process.once('disconnect', () => process.exit(0))
process.once('exit', () => {
  if (!answered && file) fs.rmSync(file, { force: true })
})
const { openDatabase } = await import('../platform/db/database.js')
const { RevocationSetBuilder } = await import('./revocation-set.js')
const { readLiveRevocations } = await import('./revocations.store.js')

const request = await sentRequest
const send = (message: RevocationLoadAnswer | { error: string }) =>
  new Promise<void>((resolve, reject) =>
    process.send!(message, undefined, {}, (err) => (err ? reject(err) : resolve())),
  )
try {
  const handle = await openDatabase(request.url, { schema: request.schema, poolSize: 1 })
  try {
    const builder = new RevocationSetBuilder()
    const accounts: [string, number][] = []
    await readLiveRevocations(handle.db, request.now, request.pageSize, builder, request.prefix, (jti, at) =>
      accounts.push([jti, at]),
    )
    const count = builder.length
    const sorted = builder.build(Math.floor(request.now / 1000))
    const fd = fs.openSync(request.file, 'wx', 0o600)
    file = request.file
    try {
      for (const a of [sorted.hi, sorted.lo, sorted.exp]) {
        const bytes = new Uint8Array(a.buffer)
        for (let at = 0; at < bytes.byteLength; ) at += fs.writeSync(fd, bytes, at)
      }
    } finally {
      fs.closeSync(fd)
    }
    await send({ entries: sorted.hi.length, count, accounts })
    answered = true
  } finally {
    await handle.close()
  }
} catch (err) {
  // Told to the service, which logs it in one line and reads the list itself; a service gone (the
  // answer's write failed) is told nothing, and the child ends.
  await send({ error: (err as Error).message }).catch(() => process.exit(0))
}
process.disconnect()
