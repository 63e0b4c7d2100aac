import type { Clock } from '../../src/platform/clock.js'

/** A clock tests move by hand. */
export class TestClock implements Clock {
  private offset = 0
  private frozenAt: number | undefined
  now(): number {
    return this.frozenAt ?? Date.now() + this.offset
  }
  advance(ms: number): void {
    this.offset += ms
    if (this.frozenAt !== undefined) this.frozenAt += ms
  }
  /**
   * Holds "now" still until `thaw()`, so that a burst of requests sees no time pass however slowly a
   * loaded machine runs it (a one-second lock must not lapse half-way through).
   */
  freeze(): void {
    this.frozenAt = this.now()
  }
  thaw(): void {
    this.frozenAt = undefined
  }
}
