import net from 'node:net'

/**
 * A TCP relay in front of a server (the shared PostgreSQL) that a test can cut and open again: an
 * outage of that server for the one app that connects through it, without stopping a server other
 * suites use. `open` after `cut` listens on the same port, so the app's connection string stays good.
 */
export class TcpRelay {
  private server: net.Server | undefined
  private readonly sockets = new Set<net.Socket>()
  port = 0
  /** Bytes the server has sent through the relay. */
  received = 0
  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    if (this.server) return
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host)
      for (const s of [client, upstream]) {
        this.sockets.add(s)
        s.on('close', () => this.sockets.delete(s))
        s.on('error', () => {
          client.destroy()
          upstream.destroy()
        })
      }
      upstream.on('data', (bytes: Buffer) => {
        this.received += bytes.length
      })
      client.pipe(upstream).pipe(client)
    })
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve))
    this.port = (server.address() as net.AddressInfo).port
    this.server = server
  }

  /** Closes the listener and every relayed connection. */
  async cut(): Promise<void> {
    const server = this.server
    this.server = undefined
    for (const s of this.sockets) s.destroy()
    if (server) await new Promise((resolve) => server.close(resolve))
  }
}

/** A relay opened in front of the database of `databaseUrl`, and the URL that connects through it. */
export async function relayedDatabase(databaseUrl: string): Promise<{ relay: TcpRelay; url: string }> {
  const direct = new URL(databaseUrl)
  const relay = new TcpRelay({ host: direct.hostname, port: Number(direct.port || 5432) })
  await relay.open()
  const url = new URL(direct)
  url.hostname = '127.0.0.1'
  url.port = String(relay.port)
  return { relay, url: url.toString() }
}
