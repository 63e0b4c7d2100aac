// The child's side of a task the service forks on its own database connection (the revocation load, a
// first-sync snapshot's build): the job it is sent, its messages back, and its file. The service gone
// (killed, crashed) closes the channel: the task is of no use to anyone then, so the child ends at once
// and deletes the file it was writing, as on any end before its result reached the service.
import { rmSync } from 'node:fs'

export interface ChildTask<Job> {
  /** The job the service sent. */
  job: Promise<Job>
  /**
   * Sends a message to the service; resolves once it has left. A message the closed channel refused
   * ends the child, as the channel's close does: the service is gone.
   */
  send(message: unknown): Promise<void>
  /** The file the task writes: deleted if the process ends before `done`. */
  owns(file: string): void
  /** The task's result reached the service: the file is the service's now. */
  done(): void
}

/**
 * Call first, before the task's modules load: a message sent before a listener is there would be lost.
 */
export function childTask<Job>(): ChildTask<Job> {
  const job = new Promise<Job>((resolve) => process.once('message', resolve))
  let file: string | undefined
  let finished = false
  process.once('disconnect', () => process.exit(0))
  process.once('exit', () => {
    if (!finished && file) rmSync(file, { force: true })
  })
  return {
    job,
    send: (message) =>
      new Promise<void>((resolve, reject) =>
        process.send!(message, undefined, {}, (err) => {
          if (!err) resolve()
          else if ((err as NodeJS.ErrnoException).code === 'EPIPE' || !process.connected) process.exit(0)
          else reject(err)
        }),
      ),
    owns: (f) => {
      file = f
    },
    done: () => {
      finished = true
    },
  }
}
