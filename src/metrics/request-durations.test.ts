// RequestDurations replaces prom-client's Histogram on the request path; what a scrape shows must not
// change: the same text, the same JSON (which the cluster primary sums), the same reset.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Histogram, Registry } from 'prom-client'
import { RequestDurations } from './request-durations.js'

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
const config = {
  name: 'wristband_http_request_duration_seconds',
  help: 'Time to answer a request',
  buckets: BUCKETS,
}
// On a bound, between bounds, below the first and above the last.
const SAMPLES: [string, string, number, number][] = [
  ['POST', '/tokens/verify', 200, 0.0004],
  ['POST', '/tokens/verify', 200, 0.001],
  ['POST', '/tokens/verify', 200, 0.0031],
  ['POST', '/tokens/verify', 429, 0.02],
  ['GET', '/health', 200, 7.5],
  ['POST', '/auth/login', 401, 0.25],
]

function both() {
  const theirs = new Registry()
  const ours = new Registry()
  const reference = new Histogram({
    ...config,
    labelNames: ['method', 'route', 'status_code'],
    registers: [theirs],
  })
  const durations = new RequestDurations({ ...config, registers: [ours] })
  for (const [method, route, status_code, seconds] of SAMPLES) {
    reference.labels({ method, route, status_code }).observe(seconds)
    durations.series({ method, route, status_code }).observe(seconds)
  }
  return { theirs, ours, reference, durations }
}

test('request durations: the exposition text is the text of prom-client’s Histogram', async () => {
  const { theirs, ours } = both()
  const text = await ours.metrics()
  assert.match(
    text,
    /wristband_http_request_duration_seconds_bucket\{le="0.005",method="POST",route="\/tokens\/verify",status_code="200"\} 3/,
  )
  assert.equal(text, await theirs.metrics())
})

test('request durations: the JSON the cluster primary sums is prom-client’s', async () => {
  const { theirs, ours } = both()
  assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON())
})

test('request durations: a series observed twice through one handle counts twice; reset empties the output', async () => {
  const { theirs, ours, reference, durations } = both()
  const series = durations.series({ method: 'GET', route: '/ready', status_code: 503 })
  series.observe(0.01)
  series.observe(0.3)
  reference.labels({ method: 'GET', route: '/ready', status_code: 503 }).observe(0.01)
  reference.labels({ method: 'GET', route: '/ready', status_code: 503 }).observe(0.3)
  assert.equal(await ours.metrics(), await theirs.metrics())
  ours.resetMetrics()
  theirs.resetMetrics()
  assert.equal(await ours.metrics(), await theirs.metrics())
  assert.doesNotMatch(await ours.metrics(), /_count/)
})
