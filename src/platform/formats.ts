import type { ValidationIssue } from './errors.js'

/** Largest amount accepted, so every amount in minor units stays an exact integer. */
export const MAX_AMOUNT = 1_000_000_000

/**
 * Converts a JSON number with at most two decimals to minor units without binary floating-point
 * arithmetic: the number's shortest decimal text (which is what the client wrote, for any number with
 * fewer than 16 significant digits) is split at the point. Returns null for three or more decimals.
 */
export function toMinorUnits(value: number): number | null {
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(String(value))
  if (!m) return null
  return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'))
}

/** Minor units back to the JSON number (1999 → 19.99; the division rounds to the same double). */
export function fromMinorUnits(cents: number): number {
  return cents / 100
}

export function moneyIssue(field: string, value: unknown): ValidationIssue | null {
  if (typeof value !== 'number') return null
  if (toMinorUnits(value) !== null) return null
  return {
    loc: ['body', field],
    msg: 'Value error, the amount must have at most two decimal places',
    type: 'value_error',
    input: value,
  }
}

export const LOCAL_DATE_TIME = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}$'

/** Whether a YYYY-MM-DDThh:mm:ss.SSS string names a real calendar date and time of day. */
export function isRealLocalDateTime(value: string): boolean {
  const [date, time] = value.split('T') as [string, string]
  const [y, mo, d] = date.split('-').map(Number) as [number, number, number]
  const [h, mi, s] = time.split(':').map(Number) as [number, number, number]
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s >= 60) return false
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate()
  return d <= daysInMonth
}

/**
 * Formats instants as local wall-clock time of an event's time zone, in the spec's
 * YYYY-MM-DDThh:mm:ss.SSS form. One formatter per zone, kept by the owning service instance.
 */
/**
 * Whether the runtime's zone database knows `timeZone` (an IANA name such as Europe/Berlin, or one of
 * its aliases): every local time of an event is formatted in it, so a misspelt zone would fail every
 * later use of the event's tickets.
 */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone })
    return true
  } catch {
    return false
  }
}

export class LocalTimeFormatter {
  private readonly formatters = new Map<string, Intl.DateTimeFormat>()

  format(epochMs: number, timeZone: string): string {
    let f = this.formatters.get(timeZone)
    if (!f) {
      f = new Intl.DateTimeFormat('en-CA', {
        timeZone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        fractionalSecondDigits: 3,
        hourCycle: 'h23',
      })
      this.formatters.set(timeZone, f)
    }
    const p: Record<string, string> = {}
    for (const part of f.formatToParts(epochMs)) p[part.type] = part.value
    return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}.${p.fractionalSecond}`
  }
}

/**
 * The instant a wall-clock time of a time zone names (`YYYY-MM-DDTHH:MM[:SS[.SSS]]`), as epoch ms: the
 * inverse of LocalTimeFormatter. A time the zone skips (the hour lost to daylight saving) is taken at the
 * offset before the change, so it lands that much later; of a time the zone passes twice, the first.
 */
export function epochOfLocal(local: string, timeZone: string, formatter = new LocalTimeFormatter()): number {
  const [date, time = '00:00'] = local.split('T') as [string, string?]
  const [y, mo, d] = date.split('-').map(Number) as [number, number, number]
  const [h = 0, mi = 0, s = 0] = time.split(':').map(Number)
  const wall = Date.UTC(y, mo - 1, d, h, mi, 0) + Math.round(s * 1000)
  // The zone's offset at an instant: its wall time there minus the instant.
  const offsetAt = (at: number) => Date.parse(`${formatter.format(at, timeZone)}Z`) - at
  // The offset a day before (outside any change around this time) gives the first candidate.
  const first = wall - offsetAt(wall - 86_400_000)
  const names = (at: number) => formatter.format(at, timeZone) === formatter.format(wall, 'UTC')
  if (names(first)) return first
  // The offset changed within the day: the offset at the first candidate is the one in force then.
  const second = wall - offsetAt(first)
  return names(second) ? second : first
}
