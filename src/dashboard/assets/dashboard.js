// Event page: reads the figures from the dashboard's JSON endpoint and refreshes them in place.
// Loaded as a file from the service (the page's CSP allows no inline script).
;(() => {
  const REFRESH_MS = 15_000
  const main = document.querySelector('main[data-stats-url]')
  if (!main) return
  const statsUrl = main.dataset.statsUrl
  const rangeSelect = main.querySelector('[data-range]')
  const statusEl = main.querySelector('[data-status]')
  const charts = { uses: null, gates: null, gateNames: '' }

  const count = new Intl.NumberFormat()
  const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })

  function setFigure(key, text) {
    const el = main.querySelector(`[data-figure="${key}"]`)
    if (el) el.textContent = text
  }

  // Phone layouts show each row as a card, labelled from the column headings.
  const headings = Array.from(main.querySelectorAll('table.types th'), (th) => th.textContent)

  function cell(text, numeric, column) {
    const td = document.createElement('td')
    td.textContent = text
    if (numeric) td.className = 'num'
    if (column !== undefined) td.dataset.label = headings[column]
    return td
  }

  function renderTypes(types) {
    const body = main.querySelector('[data-ticket-types]')
    const rows = types.map((t) => {
      const tr = document.createElement('tr')
      tr.append(
        cell(t.name, false, 0),
        cell(t.ticket_date.slice(0, 16).replace('T', ' '), false, 1),
        cell(money.format(t.price), true, 2),
        cell(count.format(t.issued), true, 3),
        cell(count.format(t.claimed), true, 4),
        cell(count.format(t.used), true, 5),
        cell(money.format(t.revenue), true, 6),
      )
      return tr
    })
    if (rows.length === 0) {
      const tr = document.createElement('tr')
      const td = cell('No ticket types yet.')
      td.colSpan = 7
      td.className = 'empty'
      tr.append(td)
      rows.push(tr)
    }
    body.replaceChildren(...rows)
  }

  // Counts are whole numbers: ticks at 1, 2, 5, 10, 20, 50… steps, never at 0.5.
  function countAxis() {
    return {
      size: 44,
      splits: (_u, _axis, _min, max) => {
        let step = 1
        while (max / step > 5) step *= String(step)[0] === '2' ? 2.5 : 2
        const out = []
        for (let v = 0; v <= max; v += step) out.push(v)
        return out
      },
    }
  }

  function chartWidth(el) {
    return Math.max(200, el.clientWidth)
  }

  function renderUses(series, timezone) {
    const el = main.querySelector('[data-chart="uses"]')
    const data = [series.points.map((p) => p.t), series.points.map((p) => p.count)]
    main.querySelector('[data-uses-total]').textContent =
      `${count.format(series.total)} uses in the range · one bar per ${describeBucket(series.bucket_seconds)} · times in ${timezone}`
    if (charts.uses) {
      charts.uses.setData(data)
      return
    }
    charts.uses = new uPlot(
      {
        width: chartWidth(el),
        height: 240,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), timezone),
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          // Each bar covers its bucket, from its start to the next one's.
          x: { range: (_u, min, max) => [min, max + series.bucket_seconds] },
          y: { range: (_u, _min, max) => [0, Math.max(1, max)] },
        },
        axes: [{}, countAxis()],
        series: [
          {},
          {
            label: 'Uses',
            stroke: '#2357d9',
            fill: 'rgba(35, 87, 217, 0.25)',
            paths: uPlot.paths.bars({ size: [0.9, 40], align: 1 }),
            points: { show: false },
          },
        ],
      },
      data,
      el,
    )
  }

  function renderGates(gates) {
    const el = main.querySelector('[data-chart="gates"]')
    const note = main.querySelector('[data-gates-note]')
    const names = gates.map((g) => g.access_gate ?? 'No gate')
    const key = names.join('\u0000')
    // Without uses the panel is its note alone, not a tall empty box.
    el.hidden = gates.length === 0
    if (gates.length === 0) {
      charts.gates?.destroy()
      charts.gates = null
      charts.gateNames = ''
      note.textContent = 'No uses yet.'
      return
    }
    note.textContent = `${gates.length} gate${gates.length === 1 ? '' : 's'}, all uses of the event`
    const data = [gates.map((_g, i) => i), gates.map((g) => g.count)]
    if (charts.gates && charts.gateNames === key) {
      charts.gates.setData(data)
      return
    }
    charts.gates?.destroy()
    charts.gateNames = key
    charts.gates = new uPlot(
      {
        width: chartWidth(el),
        height: 240,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: { time: false, range: [-0.5, gates.length - 0.5] },
          y: { range: (_u, _min, max) => [0, Math.max(1, max)] },
        },
        axes: [
          {
            splits: () => gates.map((_g, i) => i),
            values: (_u, splits) => splits.map((i) => names[i] ?? ''),
          },
          countAxis(),
        ],
        series: [
          {},
          {
            label: 'Uses',
            stroke: '#0f8a6c',
            fill: 'rgba(15, 138, 108, 0.3)',
            paths: uPlot.paths.bars({ size: [0.6, 80] }),
            points: { show: false },
          },
        ],
      },
      data,
      el,
    )
  }

  function updatedAt(iso, timeZone) {
    const time = new Intl.DateTimeFormat('en-GB', {
      timeZone,
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).format(new Date(iso))
    return `${time} (${timeZone})`
  }

  function describeBucket(seconds) {
    if (seconds % 86400 === 0) return seconds === 86400 ? 'day' : `${seconds / 86400} days`
    if (seconds % 3600 === 0) return seconds === 3600 ? 'hour' : `${seconds / 3600} hours`
    return `${seconds / 60} minutes`
  }

  function renderWebhook(w) {
    setFigure('webhook_delivered', count.format(w.delivered))
    setFigure('webhook_pending', count.format(w.pending))
    setFigure('webhook_failing', count.format(w.failing))
    setFigure('webhook_failed', count.format(w.failed))
    const url = main.querySelector('[data-webhook-url]')
    url.textContent = w.configured
      ? `Receiver: ${w.url}${w.disabled ? ` (disabled: ${w.disabled_reason})` : ''}`
      : 'No webhook receiver is registered for this event.'
    const err = main.querySelector('[data-webhook-error]')
    if (w.last_error) {
      err.className = 'last-error bad'
      err.textContent = `Last error ${w.last_error.at.replace('T', ' ').slice(0, 19)} UTC: ${w.last_error.message}`
    } else {
      err.className = 'last-error good'
      err.textContent = w.configured ? 'No failed delivery attempts.' : ''
    }
  }

  function render(stats) {
    const t = stats.totals
    setFigure('issued', count.format(t.issued))
    setFigure('claimed', count.format(t.claimed))
    setFigure('used', count.format(t.used))
    setFigure('revenue', money.format(t.revenue))
    setFigure('balance', money.format(t.balance_loaded))
    setFigure('promo_balance', money.format(t.promo_balance_loaded))
    renderTypes(stats.ticket_types)
    renderUses(stats.uses_over_time, stats.event.timezone)
    renderGates(stats.uses_per_gate)
    renderWebhook(stats.webhook)
  }

  let loading = false
  async function load() {
    if (loading) return
    loading = true
    try {
      const res = await fetch(`${statsUrl}?range=${encodeURIComponent(rangeSelect.value)}`, {
        credentials: 'same-origin',
        headers: { accept: 'application/json' },
      })
      if (res.status === 401) {
        window.location.assign('/dashboard/login')
        return
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`)
      const stats = await res.json()
      render(stats)
      statusEl.classList.remove('stale')
      // In the event's time zone, like the charts, whatever the zone of the browser.
      statusEl.textContent = `Updated ${updatedAt(stats.generated_at, stats.event.timezone)}`
      main.dataset.loaded = String(Date.now())
    } catch (err) {
      statusEl.classList.add('stale')
      statusEl.textContent = `Could not refresh (${err.message}); retrying`
    } finally {
      loading = false
    }
  }

  rangeSelect.addEventListener('change', () => {
    charts.uses?.destroy()
    charts.uses = null
    load()
  })
  new ResizeObserver(() => {
    for (const [name, chart] of [
      ['uses', charts.uses],
      ['gates', charts.gates],
    ]) {
      if (chart)
        chart.setSize({ width: chartWidth(main.querySelector(`[data-chart="${name}"]`)), height: 240 })
    }
  }).observe(main)
  setInterval(() => {
    if (document.visibilityState === 'visible') load()
  }, REFRESH_MS)
  load()
})()
