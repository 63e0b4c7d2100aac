/** Buffers are made in steps of this size, so that a buffer kept for one page fits the next ones. */
const STEP = 64 * 1024

/**
 * The buffers snapshot pages are read into and sent from, each given back once its answer was handed to
 * the socket and reused for the next page. A page is about 200 KB: a buffer made per page (outside V8's
 * heap) is memory V8 counts as external, and four scanners taking pages back to back made enough of it
 * to set off a full garbage collection every few dozen pages, which paused every other request of the
 * instance (a third of the service's busy time during four first syncs at a million tickets went to the
 * collector). At most `keep` buffers are kept between pages; a page asked for while all are out gets a
 * buffer of its own, dropped after it.
 */
export class PageBuffers {
  private readonly free: Buffer[] = []

  constructor(private readonly keep: number) {}

  /** A buffer of at least `length` bytes, owned by the caller until it gives it back. */
  take(length: number): Buffer {
    const i = this.free.findIndex((buffer) => buffer.length >= length)
    if (i >= 0) return this.free.splice(i, 1)[0]!
    // Its own memory (not a slice of Node's shared pool): it is written into again once given back.
    return Buffer.allocUnsafeSlow(Math.ceil(length / STEP) * STEP)
  }

  /** Gives back a buffer that nothing reads any more (its answer was handed to the socket). */
  give(buffer: Buffer): void {
    if (this.free.length < this.keep) this.free.push(buffer)
  }
}
