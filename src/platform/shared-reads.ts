/**
 * Reads shared by the callers of one process, never stale. A caller that finds no read of its key
 * running starts one at once. A caller that finds one running waits for the next read, shared with
 * every caller that arrives meanwhile; it starts when the running one has ended and no sooner than
 * `minIntervalMs` after that one started. Every answer thus comes from a read that started after the
 * call arrived (it sees every write acknowledged before), one caller alone is never held back, and
 * many callers polling one key back to back cost a read or two an interval instead of one read each
 * (eight dashboards polling one event's figures slowed ticket use at the gate eightfold).
 */
export function sharedReads<T>(minIntervalMs: number): (key: string, read: () => Promise<T>) => Promise<T> {
  interface Key {
    startedAt: number
    /** The read running now, if any. */
    running: Promise<T> | null
    /** The read waiting to start, shared by the callers that found one running. */
    next: Promise<T> | null
  }
  const keys = new Map<string, Key>()

  const start = (key: string, k: Key, read: () => Promise<T>) => {
    k.startedAt = performance.now()
    const running = read().finally(() => {
      if (k.running === running) k.running = null
      if (!k.running && !k.next) keys.delete(key)
    })
    k.running = running
    return running
  }

  return (key, read) => {
    const k = keys.get(key)
    if (!k) {
      const fresh: Key = { startedAt: 0, running: null, next: null }
      keys.set(key, fresh)
      return start(key, fresh, read)
    }
    if (k.next) return k.next
    if (!k.running) return start(key, k, read)
    const after = k.running.then(
      () => {},
      () => {},
    )
    const next = after
      .then(
        () =>
          new Promise((resolve) =>
            setTimeout(resolve, Math.ceil(k.startedAt + minIntervalMs - performance.now())),
          ),
      )
      .then(() => {
        k.next = null
        return start(key, k, read)
      })
    k.next = next
    return next
  }
}
