// The alert rules (deploy/prometheus/alerts.yml) and the Grafana dashboard (deploy/grafana/wristband.json)
// read only metrics the service exports: every metric name in their queries is found in a real scrape
// of a running instance, through HTTP. With promtool installed (Debian's `prometheus`), the rules pass
// `promtool check rules` and their tests `promtool test rules`, and every dashboard query parses as
// PromQL (promtool checks it as a recording rule, with Grafana's variables filled in).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const METRICS_TOKEN = 'scrape-token-0123456789abcdef'
const root = path.resolve(import.meta.dirname, '../..')
const ALERTS = path.join(root, 'deploy/prometheus/alerts.yml')
const ALERT_TESTS = path.join(root, 'deploy/prometheus/alerts.test.yml')
const DASHBOARD = path.join(root, 'deploy/grafana/wristband.json')

const promtool = spawnSync('promtool', ['--version']).status === 0
if (!promtool)
  console.log('!! promtool is not installed (apt-get install prometheus): alert rules NOT CHECKED')

/** Metric names of Prometheus itself, not of the service: `up` is set by every scrape. */
const PROMETHEUS_OWN = new Set(['up'])

interface Panel {
  title: string
  type: string
  id: number
  targets?: { expr: string; refId: string }[]
  panels?: Panel[]
}

const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; uid: string }
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])])
const dashboardQueries = panels.flatMap((p) =>
  (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
)

/** The `expr:` of every rule of alerts.yml (block scalars included). */
function alertQueries(): { alert: string; expr: string }[] {
  const out: { alert: string; expr: string }[] = []
  const lines = fs.readFileSync(ALERTS, 'utf8').split('\n')
  let alert = ''
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const name = /^\s*- alert: (\S+)/.exec(line)
    if (name) alert = name[1]!
    const expr = /^(\s*)expr: (.*)$/.exec(line)
    if (!expr) continue
    if (expr[2] !== '|') {
      out.push({ alert, expr: expr[2]! })
      continue
    }
    const body: string[] = []
    while (
      i + 1 < lines.length &&
      (lines[i + 1]!.trim() === '' || lines[i + 1]!.search(/\S/) > expr[1]!.length)
    )
      body.push(lines[++i]!)
    out.push({ alert, expr: body.join('\n') })
  }
  return out
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan'])

/**
 * The metric names a PromQL expression reads: what is left of its identifiers once strings, label
 * matchers, ranges and groupings (`by (...)`) are taken out, except functions (followed by `(`) and keywords.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
  const names = new Set<string>()
  for (const m of bare.matchAll(/(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()/g))
    if (!KEYWORDS.has(m[1]!)) names.add(m[1]!)
  return [...names]
}

/** Every series name a scrape can show: metric families, and a histogram's _bucket, _count and _sum. */
function exportedNames(scrape: string): Set<string> {
  const names = new Set<string>()
  for (const m of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]!)
    if (m[2] === 'histogram' || m[2] === 'summary')
      for (const s of ['_bucket', '_count', '_sum']) names.add(m[1]! + s)
  }
  for (const m of scrape.matchAll(/^([a-zA-Z_:][\w:]*)[{ ]/gm)) names.add(m[1]!)
  return names
}

test('the query parser finds the names it should', () => {
  assert.deepEqual(
    metricNames(
      'histogram_quantile(0.99, sum by (le) (rate(wristband_http_request_duration_seconds_bucket{route="/tokens/verify"}[5m]))) > 0.05',
    ),
    ['wristband_http_request_duration_seconds_bucket'],
  )
  assert.deepEqual(metricNames('up{job="wristband"} == 0'), ['up'])
  assert.deepEqual(metricNames('sum by (instance, le) (x_count offset 1h) and on (instance) y > bool 2'), [
    'x_count',
    'y',
  ])
  assert.deepEqual(metricNames('max(wristband_retention_lag_seconds) > 3600'), [
    'wristband_retention_lag_seconds',
  ])
  assert.deepEqual(metricNames('sum(rate(a_total{x="sum(b_total)"}[5m])) / sum(rate(c_total[5m]))'), [
    'a_total',
    'c_total',
  ])
})

test('the dashboard is importable: unique panel ids, a Prometheus query in every graph, no fixed data source', () => {
  const ids = panels.map((p) => p.id)
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique')
  for (const p of panels.filter((p) => p.type !== 'row'))
    assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has a query`)
  assert.ok(dashboardQueries.length >= 20)
  assert.doesNotMatch(
    fs.readFileSync(DASHBOARD, 'utf8'),
    /"uid": "(?!\$\{datasource\}|-- Grafana --|wristband-overview)/,
  )
})

forEachBackend(
  httpBackends,
  'alert rules and dashboard read exported metrics',
  (ctx) => {
    let t: TestApp
    let exported: Set<string>
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      // A few requests, so that every family has shown itself (a family without samples still has TYPE).
      await login(t, 'root@example.com')
      await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: 'not-a-token' } })
      await t.request({ method: 'GET', url: '/ready' })
      const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
      assert.equal(res.statusCode, 200)
      exported = exportedNames(res.body)
      assert.ok(exported.has('wristband_http_request_duration_seconds_bucket'))
    })

    /** Each query reads at least one metric, and every metric it reads is one the scrape shows. */
    const assertExported = (queries: { where: string; expr: string }[]) => {
      for (const { where, expr } of queries) {
        const names = metricNames(expr)
        assert.ok(names.length > 0, `${where}: no metric found in ${expr}`)
        for (const name of names)
          assert.ok(
            PROMETHEUS_OWN.has(name) || exported.has(name),
            `${where} reads ${name}, which /metrics does not export`,
          )
      }
    }

    test('every metric an alert reads is exported', () => {
      const queries = alertQueries()
      assert.ok(queries.length >= 15, `found ${queries.length} alert expressions`)
      assertExported(queries.map(({ alert, expr }) => ({ where: `alert ${alert}`, expr })))
    })

    test('every metric a dashboard panel reads is exported', () => {
      assertExported(dashboardQueries.map(({ panel, expr }) => ({ where: `panel ${panel}`, expr })))
    })
  },
  { METRICS_TOKEN },
)

test('promtool: the rules check, their tests pass, the dashboard queries parse', {
  skip: promtool ? false : 'promtool is not installed',
}, () => {
  const run = (...args: string[]) => {
    const r = spawnSync('promtool', args, { encoding: 'utf8' })
    assert.equal(r.status, 0, `promtool ${args.join(' ')}:\n${r.stdout}${r.stderr}`)
  }
  run('check', 'rules', ALERTS)
  run('test', 'rules', ALERT_TESTS)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-dashboard-'))
  try {
    const rules = dashboardQueries.map(({ expr }, i) => {
      const filled = expr
        .replaceAll('$__rate_interval', '5m')
        .replaceAll('$job', '.*')
        .replaceAll('$instance', '.*')
      return `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(filled)}`
    })
    const file = path.join(dir, 'dashboard-rules.yml')
    fs.writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`)
    run('check', 'rules', file)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
