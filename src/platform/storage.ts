/** Why a write failed for want of storage, as readiness and the log name it. */
export type StorageProblem = 'disk_full' | 'read_only' | 'not_writable'

/**
 * The storage problem behind a driver or file-system error, or undefined for any other error. These
 * are the dependency's failures, not the request's: the answer is 503 and nothing was changed.
 */
export function storageProblem(err: unknown): StorageProblem | undefined {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code !== 'string') return undefined
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT' || code === '53100') return 'disk_full'
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS' || code === '25006') return 'read_only'
  if (
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_CANTOPEN') ||
    code === 'SQLITE_PERM' ||
    code === 'EACCES' ||
    code === 'EPERM' ||
    code === '42501' // insufficient_privilege: the service's database role may not write
  )
    return 'not_writable'
  return undefined
}
