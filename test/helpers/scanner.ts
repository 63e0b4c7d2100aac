// Shared by the edge tests: a fetch that goes through app.inject, with a switch
// that takes the network away.
import { nextAddress, type TestApp } from './app.js'

export interface Network {
  fetch: typeof fetch
  online: boolean
  /** Requests the adapter refused while offline. */
  refused: number
}

/** A device's network: one client address, requests answered by the app in-process. */
export function deviceNetwork(t: TestApp): Network {
  const address = nextAddress()
  const net: Network = {
    online: true,
    refused: 0,
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      if (!net.online) {
        net.refused++
        throw new TypeError('fetch failed: network is down')
      }
      const url = new URL(String(input))
      const res = await t.app.inject({
        method: (init?.method ?? 'GET') as 'GET' | 'POST',
        url: url.pathname + url.search,
        headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': address },
        ...(init?.body !== undefined ? { payload: String(init.body) } : {}),
      })
      const date = res.headers.date
      return new Response(res.body, {
        status: res.statusCode,
        headers: { 'content-type': 'application/json', ...(typeof date === 'string' ? { date } : {}) },
      })
    }) as typeof fetch,
  }
  return net
}
