import { Histogram, type MetricObjectWithValues, type MetricValueWithName, type Registry } from 'prom-client'

type Label = 'method' | 'route' | 'status_code'
type Labels = Record<Label, string | number>

/** One label combination's counts: `buckets[i]` counts observations in (bound i-1, bound i]; the last, above every bound. */
export interface DurationSeries {
  observe(seconds: number): void
}

interface Cell extends DurationSeries {
  readonly labels: Labels
  readonly buckets: Float64Array
  sum: number
  count: number
}

/**
 * wristband_http_request_duration_seconds, counted in plain numbers. prom-client's Histogram copies,
 * checks and hashes the labels of every observation (an object and a string per call), about 3 % of a
 * verify request in the lane's profile; here a label combination is resolved once (`series`) and an
 * observation is a bucket search and three additions.
 *
 * It stays a prom-client Histogram for the registry and the cluster aggregator: `get()` and
 * `getForPromString()` answer in the shapes prom-client's own histogram gives (same names, labels,
 * cumulative buckets, `+Inf`, `_sum`, `_count`), so the exposition text is unchanged.
 */
export class RequestDurations extends Histogram<Label> {
  private readonly bounds: readonly number[]
  private readonly cells: Cell[] = []
  private readonly metricName: string
  private readonly metricHelp: string

  constructor(config: { name: string; help: string; buckets: number[]; registers: Registry[] }) {
    super({ ...config, labelNames: ['method', 'route', 'status_code'] })
    this.bounds = config.buckets
    this.metricName = config.name
    this.metricHelp = config.help
  }

  /** The counts of one label combination (made on first use; a linear search: keep it and call `observe` on it). */
  series(labels: Labels): DurationSeries {
    const known = this.cells.find(
      (c) =>
        c.labels.method === labels.method &&
        c.labels.route === labels.route &&
        c.labels.status_code === labels.status_code,
    )
    if (known) return known
    const bounds = this.bounds
    const cell: Cell = {
      labels,
      buckets: new Float64Array(bounds.length + 1),
      sum: 0,
      count: 0,
      observe(seconds) {
        let i = 0
        while (i < bounds.length && seconds > bounds[i]!) i++
        cell.buckets[i]!++
        cell.sum += seconds
        cell.count++
      },
    }
    this.cells.push(cell)
    return cell
  }

  /** What the registry writes as text (prom-client calls it when a metric has it). */
  async getForPromString() {
    const values: (MetricValueWithName<string> & { sharedLabels: Labels; exemplar: null | undefined })[] = []
    const bucket = `${this.metricName}_bucket`
    for (const cell of this.cells) {
      if (cell.count === 0) continue
      let cumulative = 0
      this.bounds.forEach((le, i) => {
        cumulative += cell.buckets[i]!
        values.push({
          labels: { le },
          sharedLabels: cell.labels,
          value: cumulative,
          metricName: bucket,
          exemplar: null,
        })
      })
      values.push(
        {
          labels: { le: '+Inf' },
          sharedLabels: cell.labels,
          value: cell.count,
          metricName: bucket,
          exemplar: null,
        },
        {
          labels: {},
          sharedLabels: cell.labels,
          value: cell.sum,
          metricName: `${this.metricName}_sum`,
          exemplar: undefined,
        },
        {
          labels: {},
          sharedLabels: cell.labels,
          value: cell.count,
          metricName: `${this.metricName}_count`,
          exemplar: undefined,
        },
      )
    }
    return {
      name: this.metricName,
      help: this.metricHelp,
      type: 'histogram' as const,
      aggregator: 'sum' as const,
      values,
    }
  }

  override async get(): Promise<MetricObjectWithValues<MetricValueWithName<Label>>> {
    const data = await this.getForPromString()
    const values = data.values.map(({ sharedLabels, labels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }))
    // prom-client's type asks for `collect`, which its own histograms' get() does not return either
    // (the answer crosses to the primary process in a cluster, where a function cannot go).
    return { ...data, values } as unknown as MetricObjectWithValues<MetricValueWithName<Label>>
  }

  /** As prom-client's: every series is gone from the output until it is observed again. */
  override reset(): void {
    // prom-client's constructor calls reset() before this class's fields exist.
    if (this.cells === undefined) return
    for (const cell of this.cells) {
      cell.buckets.fill(0)
      cell.sum = 0
      cell.count = 0
    }
  }
}
