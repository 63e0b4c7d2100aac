/**
 * Instants as an event's local time, `YYYY-MM-DDTHH:MM:SS`, as the check-in rules compare them
 * (checkin-rules.ts). Formatting with `Intl` costs microseconds, and the scanner needs the local time of
 * every scan it decides and of the ticket's earlier scans on the list: so the zone's offset from UTC is
 * asked of `Intl` once per hour of UTC time and reused for every instant of that hour. An hour whose
 * two ends have different offsets holds a change (daylight saving time): its instants are formatted by
 * `Intl` one by one, so the answers are always those of `Intl`.
 */

const HOUR_MS = 3_600_000
/** Hours whose offset is kept; a scanner meets a few dozen (the festival's days), this bounds the rest. */
const MAX_HOURS = 4096

export class LocalTime {
  private readonly formatter: Intl.DateTimeFormat
  /** The zone's offset (ms, added to UTC) in an hour of UTC time, by the hour's start; null: it changes. */
  private readonly offsets = new Map<number, number | null>()

  /** `timeZone`: an IANA zone name (RangeError for one the runtime does not know). */
  constructor(readonly timeZone: string) {
    // Swedish writes date and time as ISO 8601 does, a space between them: `2027-07-16 23:00:00`.
    this.formatter = new Intl.DateTimeFormat('sv-SE', { timeZone, dateStyle: 'short', timeStyle: 'medium' })
  }

  /** The local time of the instant `ms` (epoch milliseconds), to the second. */
  format(ms: number): string {
    const hour = Math.floor(ms / HOUR_MS) * HOUR_MS
    let offset = this.offsets.get(hour)
    if (offset === undefined) {
      const first = this.offsetAt(hour)
      offset = first === this.offsetAt(hour + HOUR_MS - 1000) ? first : null
      if (this.offsets.size >= MAX_HOURS) this.offsets.clear()
      this.offsets.set(hour, offset)
    }
    if (offset === null) return this.viaIntl(ms)
    return new Date(ms + offset).toISOString().slice(0, 19)
  }

  private viaIntl(ms: number): string {
    return this.formatter.format(ms).replace(' ', 'T')
  }

  /** The offset at a whole second: its local time read as UTC, less the instant. */
  private offsetAt(second: number): number {
    return Date.parse(`${this.viaIntl(second)}Z`) - second
  }
}
