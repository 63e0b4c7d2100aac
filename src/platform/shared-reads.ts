/**
 * Reads shared by the callers of one process, never stale: each call is answered by a read that
 * starts after the call arrived (so it sees every write acknowledged before), the calls that arrive
 * while a read waits to start share it, and one key is read at most once every `minIntervalMs`.
 * Many callers polling one key back to back then cost about as much as one (issue 25: eight
 * dashboards polling one event's figures slowed ticket use eightfold).
 */
export function sharedReads<T>(minIntervalMs: number): (key: string, read: () => Promise<T>) => Promise<T> {
  /** Per key: when its last read started, and the read waiting to start (shared by its callers). */
  const keys = new Map<string, { startedAt: number; next: Promise<T> | null }>()

  const forget = (now: number) => {
    for (const [key, k] of keys) if (!k.next && now - k.startedAt >= minIntervalMs) keys.delete(key)
  }

  return (key, read) => {
    const now = performance.now()
    const known = keys.get(key)
    if (known?.next) return known.next
    const wait = known ? known.startedAt + minIntervalMs - now : 0
    if (wait <= 0) {
      // Keys are events and ranges: a handful live at once; forget the idle ones now and then.
      if (keys.size >= 1024) forget(now)
      keys.set(key, { startedAt: now, next: null })
      return read()
    }
    const entry = known!
    entry.next = new Promise<T>((resolve, reject) => {
      setTimeout(() => {
        entry.next = null
        entry.startedAt = performance.now()
        read().then(resolve, reject)
      }, Math.ceil(wait))
    })
    return entry.next
  }
}
