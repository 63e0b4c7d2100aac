/**
 * The service's own spans (password hash, token signing, revocation check, ticket use, webhook
 * delivery), the active trace's id for the logs and the `traceparent` of background jobs, without
 * importing OpenTelemetry: what the SDK registered is read from the OpenTelemetry API's global (the
 * same object `@opentelemetry/api` reads), so while tracing is off (no OTEL_* variables) every helper
 * here is one property read and the SDK is never loaded. `startTracing` loads it (`telemetry.ts`).
 */

type Attributes = Record<string, string | number | boolean>

interface SpanLike {
  spanContext(): { traceId: string; spanId: string; traceFlags: number }
  setAttribute(key: string, value: string | number | boolean): void
  recordException(err: unknown): void
  setStatus(status: { code: number; message?: string }): void
  end(): void
}
interface ContextLike {
  getValue(key: symbol): unknown
}
interface OtelGlobal {
  trace?: {
    getTracer(name: string): {
      startActiveSpan<T>(name: string, opts: { attributes?: Attributes }, fn: (span: SpanLike) => T): T
      startSpan(
        name: string,
        opts: { attributes?: Attributes; startTime?: number; kind?: number },
      ): SpanLike & {
        end(endTime?: number): void
      }
    }
  }
  context?: { active(): ContextLike; with<T>(ctx: ContextLike, fn: () => T): T }
  /** The registered propagator itself: unlike the API's wrapper, it needs its setter and getter. */
  propagation?: {
    inject(ctx: ContextLike, carrier: Carrier, setter: typeof SETTER): void
    extract(ctx: ContextLike, carrier: Carrier, getter: typeof GETTER): ContextLike
  }
}

type Carrier = Record<string, string>
const SETTER = {
  set: (carrier: Carrier, key: string, value: string) => {
    carrier[key] = value
  },
}
const GETTER = {
  get: (carrier: Carrier, key: string) => carrier[key],
  keys: (carrier: Carrier) => Object.keys(carrier),
}

/** Where `@opentelemetry/api` 1.x keeps what the SDK registered. */
const API_GLOBAL = Symbol.for('opentelemetry.js.api.1')
/** The context key of the active span (`@opentelemetry/api`'s `createContextKey` is `Symbol.for`). */
const SPAN_KEY = Symbol.for('OpenTelemetry Context Key SPAN')
const ERROR = 2

function otel(): OtelGlobal | undefined {
  return (globalThis as Record<symbol, OtelGlobal | undefined>)[API_GLOBAL]
}

function activeSpan(g: OtelGlobal | undefined): SpanLike | undefined {
  const ctx = g?.context?.active()
  return ctx ? (ctx.getValue(SPAN_KEY) as SpanLike | undefined) : undefined
}

/**
 * Runs `fn` in a span named `name` when a traced request (or job) is running, else just runs it: a
 * step of the service is never a trace of its own (the verify lane's revocation checks make none).
 */
export function traced<T>(name: string, attributes: Attributes, fn: () => T): T {
  const g = otel()
  if (!g?.trace || activeSpan(g) === undefined) return fn()
  return g.trace.getTracer('wristband').startActiveSpan(name, { attributes }, (span) => {
    const fail = (err: unknown) => {
      span.recordException(err)
      span.setStatus({ code: ERROR, message: (err as Error)?.message })
      span.end()
      throw err
    }
    let out: T
    try {
      out = fn()
    } catch (err) {
      return fail(err)
    }
    if (out instanceof Promise)
      return out.then((v) => {
        span.end()
        return v
      }, fail) as T
    span.end()
    return out
  })
}

/** A step that already ran (a SQLite statement, timed by Kysely) as a finished child span of the active one. */
export function recordFinishedSpan(name: string, attributes: Attributes, durationMs: number): void {
  const g = otel()
  if (!g?.trace || activeSpan(g) === undefined) return
  const end = Date.now()
  const CLIENT = 2
  g.trace
    .getTracer('wristband')
    .startSpan(name, { attributes, startTime: end - durationMs, kind: CLIENT })
    .end(end)
}

/** The active trace and span ids, for a log line (nothing while tracing is off or no span runs). */
export function traceFields(): { trace_id: string; span_id: string } | Record<string, never> {
  const span = activeSpan(otel())
  if (!span) return {}
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}

/** The W3C `traceparent` of the active span, to carry into work done later (a job); undefined when none. */
export function currentTraceparent(): string | undefined {
  const g = otel()
  if (!g?.propagation || !g.context || activeSpan(g) === undefined) return undefined
  const carrier: Record<string, string> = {}
  g.propagation.inject(g.context.active(), carrier, SETTER)
  return carrier.traceparent
}

/** Runs `fn` as a continuation of the trace of `traceparent` (a job queued by a traced request). */
export function continueTrace<T>(traceparent: string | null | undefined, fn: () => T): T {
  const g = otel()
  if (!traceparent || !g?.propagation || !g.context) return fn()
  const ctx = g.propagation.extract(g.context.active(), { traceparent }, GETTER)
  return g.context.with(ctx, fn)
}

/** Whether the standard variables ask for traces: an OTLP endpoint or a traces exporter, and the SDK not disabled. */
export function tracingRequested(env: Record<string, string | undefined>): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false
  const exporter = env.OTEL_TRACES_EXPORTER?.trim()
  if (exporter !== undefined && exporter !== '') return exporter !== 'none'
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
}

export interface TracingHandle {
  flush(): Promise<void>
  shutdown(): Promise<void>
}

/**
 * Starts the SDK once per process (it is the process's: a second app in the same process, as in tests,
 * shares it). Imported only here, and only when asked for.
 */
export async function startTracing(): Promise<TracingHandle> {
  const key = Symbol.for('wristband.telemetry')
  const holder = globalThis as Record<symbol, Promise<TracingHandle> | undefined>
  holder[key] ??= import('./telemetry.js').then((m) => m.startSdk())
  return holder[key]
}
