import { type DBSchema, type IDBPDatabase, openDB } from 'idb'
import {
  type LocalScan,
  type QueuedScan,
  type ScannerMeta,
  type ScannerState,
  type ScannerStorage,
  splitState,
  type TicketState,
  type UsePatch,
} from './storage.js'

interface Schema extends DBSchema {
  meta: { key: 'meta'; value: ScannerMeta }
  tickets: { key: string; value: TicketState }
  /** The scans this device accepted, per ticket. */
  local: { key: string; value: LocalScan[] }
  /** Keyed by an increasing number: the order the scans were made in, the order they are uploaded in. */
  queue: { key: number; value: QueuedScan }
}

export interface IndexedDbStorageOptions {
  /** The database's name; one per scanner set-up (default `wristband-scanner`). */
  name?: string
  /**
   * A `localStorage` key under which an earlier version of the application saved `exportState()`: when
   * this database is still empty its state is imported, and the key is removed once it is in IndexedDB.
   */
  fromLocalStorage?: string
}

/**
 * A scanner's state in IndexedDB, for browsers: one record per ticket, so an event of a million tickets
 * fits where `localStorage` (about 5 MB per origin) held some 67,000. Each scan is written (its use and
 * its queued upload in one transaction) before it is answered, each feed page with the cursor after it.
 */
export class IndexedDbStorage implements ScannerStorage {
  private constructor(private readonly db: IDBPDatabase<Schema>) {}

  static async open(options: IndexedDbStorageOptions = {}): Promise<IndexedDbStorage> {
    const db = await openDB<Schema>(options.name ?? 'wristband-scanner', 1, {
      upgrade(d) {
        d.createObjectStore('meta')
        d.createObjectStore('tickets')
        d.createObjectStore('local')
        d.createObjectStore('queue', { autoIncrement: true })
      },
    })
    const storage = new IndexedDbStorage(db)
    if (options.fromLocalStorage !== undefined) await storage.migrate(options.fromLocalStorage)
    return storage
  }

  /** Imports a state that an earlier version kept in localStorage, then removes it there. */
  private async migrate(key: string): Promise<void> {
    const saved = globalThis.localStorage?.getItem(key)
    if (saved == null) return
    // A state already imported (the page closed before the key was removed) is not imported again.
    if ((await this.db.get('meta', 'meta')) === undefined) await this.importState(JSON.parse(saved))
    globalThis.localStorage.removeItem(key)
  }

  /** Replaces whatever is stored with a state from `exportState()`, in one transaction. */
  async importState(state: ScannerState): Promise<void> {
    const parts = splitState(state)
    const tx = this.db.transaction(['meta', 'tickets', 'local', 'queue'], 'readwrite')
    for (const name of ['tickets', 'local', 'queue'] as const) void tx.objectStore(name).clear()
    for (const [key, t] of parts.tickets) void tx.objectStore('tickets').put(t, key)
    for (const [key, l] of parts.local) void tx.objectStore('local').put(l, key)
    for (const q of parts.queue) void tx.objectStore('queue').add(q)
    void tx.objectStore('meta').put(parts.meta, 'meta')
    await tx.done
  }

  /** Removes everything (a device set up for another event starts afresh). */
  async clear(): Promise<void> {
    const tx = this.db.transaction(['meta', 'tickets', 'local', 'queue'], 'readwrite')
    for (const name of ['meta', 'tickets', 'local', 'queue'] as const) void tx.objectStore(name).clear()
    await tx.done
  }

  close(): void {
    this.db.close()
  }

  async load() {
    const tx = this.db.transaction(['meta', 'tickets', 'queue'])
    const [meta, queue, known] = await Promise.all([
      tx.objectStore('meta').get('meta'),
      tx.objectStore('queue').getAll(),
      tx.objectStore('tickets').count(),
    ])
    return { meta, queue, known }
  }

  async read(key: string) {
    const tx = this.db.transaction(['tickets', 'local'])
    const [ticket, local] = await Promise.all([
      tx.objectStore('tickets').get(key),
      tx.objectStore('local').get(key),
    ])
    return { ticket, local: local ?? [] }
  }

  async recordScan(key: string, queued: QueuedScan, local?: LocalScan[], ticket?: TicketState) {
    const tx = this.db.transaction(['tickets', 'local', 'queue'], 'readwrite')
    if (ticket) void tx.objectStore('tickets').put(ticket, key)
    if (local) void tx.objectStore('local').put(local, key)
    void tx.objectStore('queue').add(queued)
    await tx.done
  }

  async applyFeed(tickets: Iterable<[string, TicketState]>, meta: ScannerMeta) {
    const tx = this.db.transaction(['tickets', 'meta'], 'readwrite')
    const store = tx.objectStore('tickets')
    // The puts are queued without waiting for each: one transaction, committed as a whole.
    for (const [key, t] of tickets) void store.put(t, key)
    void tx.objectStore('meta').put(meta, 'meta')
    await tx.done
  }

  count() {
    return this.db.count('tickets')
  }

  async applyUploads(count: number, uses: [string, UsePatch][]) {
    const tx = this.db.transaction(['tickets', 'queue'], 'readwrite')
    const queue = tx.objectStore('queue')
    for (const done of await queue.getAllKeys(undefined, count)) void queue.delete(done)
    const tickets = tx.objectStore('tickets')
    for (const [key, use] of uses) {
      const t = await tickets.get(key)
      if (t) void tickets.put({ ...t, ...use }, key)
    }
    await tx.done
  }

  async saveMeta(meta: ScannerMeta) {
    await this.db.put('meta', meta, 'meta')
  }
}

/** Opens (creating it the first time) a scanner's IndexedDB storage: `Scanner.open({ …, storage })`. */
export function openIndexedDbStorage(options?: IndexedDbStorageOptions): Promise<IndexedDbStorage> {
  return IndexedDbStorage.open(options)
}
