import { fork } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

/**
 * Forks one of the service's child processes, sends it its message and closes the channel at once, as
 * the service's death (killed, crashed) would: resolves when the child has ended.
 */
export async function runOrphaned(script: URL, message: object): Promise<void> {
  const child = fork(fileURLToPath(script), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const exited = once(child, 'exit')
  child.send(message)
  child.disconnect()
  await exited
}
