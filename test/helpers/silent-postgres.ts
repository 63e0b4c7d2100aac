import net from 'node:net'

/**
 * A PostgreSQL server that lets a client in (trust: AuthenticationOk, ReadyForQuery) and then answers
 * nothing: every query waits for good, as on a server that hangs or a lock that is never released. The
 * URL to give a client, and the way to close it.
 */
export async function silentPostgres(): Promise<{ url: string; close(): void }> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.once('data', () => {
      // 'R' AuthenticationOk (length 8, code 0), then 'Z' ReadyForQuery (length 5, idle).
      socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    close() {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}
