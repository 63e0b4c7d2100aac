import type { TestApp } from './app.js'
import { until } from './until.js'

/**
 * Reads one sample from Prometheus exposition text: the value of `name` on the series whose labels
 * include every label given, or 0 when no such series was exported yet (a counter never moved).
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const found: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      found[l[1]!] = l[2]!
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) total += Number(m[3])
  }
  return total
}

/** The instance's current value of a metric (summed over the series whose labels include `labels`). */
export async function metricValue(
  t: TestApp,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  return sample((await t.app.metrics.scrape()).body, name, labels)
}

/**
 * Waits until the instance's Redis client has failed `n` more times than now: while Redis is down, each
 * failed reconnection attempt is one (wristband_redis_errors_total), so a test can let several attempts
 * pass without sleeping a fixed time.
 */
export async function moreRedisErrors(t: TestApp, n: number): Promise<void> {
  const errors = () => metricValue(t, 'wristband_redis_errors_total')
  const from = await errors()
  await until(`${n} more failed Redis attempts`, async () => (await errors()) >= from + n)
}
