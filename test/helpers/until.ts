import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Polls until `check` holds, for state that something else moves on its own time (the job runner,
 * a fire-and-forget audit write). Fails after `timeoutMs`, which bounds a hang, not a speed.
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}
