import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Polls until `check` returns a value (anything but undefined or false) and returns it, for state that
 * something else moves on its own time (the job runner, a fire-and-forget audit write). Fails after
 * `timeoutMs`, which bounds a hang, not a speed: generous (30 s), since a shared machine can stall a
 * process for seconds, and a passing test never waits for it.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  what = 'a condition',
): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

/** Polls until `check` holds; `what` names it in the failure. */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(async () => (await check()) || undefined, timeoutMs, what)
}
