// A real HTTP receiver on loopback for the webhook tests.
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceivedRequest {
  path: string
  headers: http.IncomingHttpHeaders
  body: string
  /** status this receiver answered */
  answered: number
}

export interface Answer {
  status: number
  headers?: Record<string, string>
  body?: string
}

export interface Receiver {
  url: string
  log: ReceivedRequest[]
  /** Answers given in turn; when used up, 200. */
  script: Answer[]
  close(): Promise<void>
}

export async function startReceiver(script: Answer[] = []): Promise<Receiver> {
  const log: ReceivedRequest[] = []
  const receiver = { log, script } as Receiver
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const answer = receiver.script.shift() ?? { status: 200, body: 'ok' }
      log.push({
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        answered: answer.status,
      })
      res.writeHead(answer.status, answer.headers ?? {})
      res.end(answer.body ?? '')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/wristband`
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return receiver
}
