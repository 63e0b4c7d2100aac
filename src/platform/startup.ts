/**
 * Start-up failures a user can act on (the database cannot be reached, the port is taken): the
 * command line prints their message as one line, without a stack trace, and exits 1.
 */
export class StartupError extends Error {}

/** The database URL without its password, to name it in a message. */
export function shownUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]*):[^@]*@/, '$1:***@')
}

/** What went wrong opening or migrating the database, in one line that names it (never its password). */
export function databaseUnavailable(url: string, err: unknown): StartupError {
  if (err instanceof StartupError) return err
  const e = err as Error & { code?: string; errors?: Error[] }
  // A refused connection to `localhost` is an AggregateError (one per address) with an empty message.
  const message = e.message || e.errors?.map((x) => x.message).join('; ') || String(e.code ?? err)
  return new StartupError(`cannot use the database ${shownUrl(url)}: ${message.split('\n')[0]}`, {
    cause: err,
  })
}

/** `listen()` failing: the port is taken, or needs privileges; undefined for other errors. */
export function listenFailure(
  err: unknown,
  setting: 'PORT' | 'METRICS_PORT' = 'PORT',
): StartupError | undefined {
  const e = err as { code?: string; syscall?: string; address?: string; port?: number }
  if (e?.syscall !== 'listen') return undefined
  const where = `${e.address ?? ''}:${e.port ?? ''}`
  if (e.code === 'EADDRINUSE')
    return new StartupError(`cannot listen on ${where}: the port is in use by another process (${setting})`)
  if (e.code === 'EACCES')
    return new StartupError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges)`)
  if (e.code === 'EADDRNOTAVAIL')
    return new StartupError(`cannot listen on ${where}: no such address on this machine (HOST)`)
  return undefined
}
