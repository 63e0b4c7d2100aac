import type { Clock } from '../../src/platform/clock.js'

/** A clock tests move by hand. */
export class TestClock implements Clock {
  private offset = 0
  now(): number {
    return Date.now() + this.offset
  }
  advance(ms: number): void {
    this.offset += ms
  }
}
