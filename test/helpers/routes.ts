import type { FastifyInstance } from 'fastify'

export interface RegisteredRoute {
  method: string
  /** Fastify's form: `/devices/:device_id/token`. */
  url: string
}

/**
 * Every route the app registered, read back from Fastify's own route tree (printRoutes), so a test
 * notices a route that the OpenAPI document forgot. HEAD routes Fastify adds for GETs are left out.
 */
export function registeredRoutes(app: FastifyInstance): RegisteredRoute[] {
  const out: RegisteredRoute[] = []
  const stack: string[] = []
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:[│ ] {3})*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (!m) continue
    const depth = m[1]!.length / 4
    stack.length = depth
    const url = `${stack[depth - 1] ?? ''}${m[2]}`.replace(/\/{2,}/g, '/')
    stack.push(url)
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim()))
      if (method && method !== 'HEAD') out.push({ method, url })
  }
  return out
}

/** `/a/:id` → `/a/{id}`, the OpenAPI form. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}
