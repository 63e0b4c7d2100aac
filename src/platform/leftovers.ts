// What an instance keeps in DATA_DIR while it runs (its folder of first-sync snapshots, the revocation
// load's file) it deletes itself when it stops; a kill -9, a crash or a lost container leaves it there.
// Whether its owner still runs cannot be told by a pid: pids repeat (a container's restarted service is
// pid 1 again, its volume kept) and a DATA_DIR may be shared by instances in other pid namespaces. So an
// owner marks what it still uses (its mtime, now) more often than the others look, and what nobody marked
// for much longer than that is a leftover any instance may delete.
import fs from 'node:fs/promises'
import path from 'node:path'

/** Marks `entry` (a file or folder) as in use: its mtime is now. */
export async function markInUse(entry: string): Promise<void> {
  const now = new Date()
  await fs.utimes(entry, now, now)
}

export interface Leftovers {
  /** Which entries of the folder are of that kind (names). */
  matches(name: string): boolean
  /** How long an entry's owner may go without marking it while it runs. */
  olderThanMs: number
  /** The caller's own entry (a name), never deleted whatever its mtime. */
  own?: string
}

/**
 * Deletes the entries of `folder` that match and were last marked more than `olderThanMs` ago (the
 * wall clock, as the file system's), folders with what they hold; a symbolic link is deleted, never
 * followed. A missing folder holds none; an entry that cannot be looked at or deleted now (another
 * instance deleting it at the same moment) is left to the next look. Resolves with the names deleted.
 */
export async function deleteLeftovers(folder: string, leftovers: Leftovers): Promise<string[]> {
  const names = await fs.readdir(folder).catch(() => [])
  const before = Date.now() - leftovers.olderThanMs
  const deleted = await Promise.all(
    names
      .filter((name) => name !== leftovers.own && leftovers.matches(name))
      .map(async (name) => {
        const entry = path.join(folder, name)
        try {
          if ((await fs.lstat(entry)).mtimeMs >= before) return []
          await fs.rm(entry, { recursive: true, force: true })
          return [name]
        } catch {
          return []
        }
      }),
  )
  return deleted.flat()
}
