/**
 * The exit status of each refusal at start, one per kind and stable across releases, so that a unit
 * (RestartPreventExitStatus=) or a script can tell them apart. docs/operations.md ("Refusals at
 * start") lists them; bin/wristband.js repeats `node` (it runs before anything is imported).
 */
export const EXIT_STATUS = {
  /** A bug: printed in full, with its stack. */
  unexpected: 1,
  /** A bad command line (unknown option, missing argument) or seed document. */
  usage: 2,
  /** A setting with a bad value, or a combination that cannot work. */
  setting: 10,
  /** A variable that is no setting but looks like one: the service's prefix, a near-miss, the wrong case. */
  unknownVariable: 11,
  /** NODE_ENV=production without DATABASE_URL (no silent SQLite file). */
  productionDatabase: 12,
  /** A URL setting with a scheme it cannot use (REDIS_URL=http://…). */
  urlScheme: 13,
  /** A secret given twice (NAME and NAME_FILE, or one of them and a credential) or a file that cannot be read. */
  secretSource: 14,
  /** The database cannot be reached or used (refused, wrong role, schema not creatable). */
  database: 15,
  /** The port (PORT or METRICS_PORT) cannot be listened on. */
  listen: 16,
  /** DATA_DIR takes no file. */
  dataDir: 17,
  /** `wristband backup`: the folder of FILE does not exist or takes no file. */
  backupTarget: 18,
  /** An unsupported Node version. */
  node: 20,
} as const

export type ExitStatus = (typeof EXIT_STATUS)[keyof typeof EXIT_STATUS]

/**
 * Start-up failures a user can act on (the database cannot be reached, the port is taken): the
 * command line prints their message as one line, without a stack trace, and exits with `exitStatus`.
 */
export class StartupError extends Error {
  constructor(
    message: string,
    readonly exitStatus: ExitStatus,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

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
  return new StartupError(
    `cannot use the database ${shownUrl(url)}: ${message.split('\n')[0]}`,
    EXIT_STATUS.database,
    { cause: err },
  )
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
    return new StartupError(
      `cannot listen on ${where}: the port is in use by another process (${setting})`,
      EXIT_STATUS.listen,
    )
  if (e.code === 'EACCES')
    return new StartupError(
      `cannot listen on ${where}: permission denied (ports below 1024 need privileges)`,
      EXIT_STATUS.listen,
    )
  if (e.code === 'EADDRNOTAVAIL')
    return new StartupError(
      `cannot listen on ${where}: no such address on this machine (HOST)`,
      EXIT_STATUS.listen,
    )
  return undefined
}
