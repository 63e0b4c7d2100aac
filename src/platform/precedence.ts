declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's answers are bulk (a first sync's pages): each waits for its turn while a request of
     * another route is being answered (`RequestPrecedence`).
     */
    yieldsToRequests?: boolean
  }
}

/** A request closed less than this long ago: the instance is busy (`quiet`). */
const LATELY_MS = 100

/**
 * Which requests an instance answers first. A bulk answer (a first sync's page, about 200 KB) takes a
 * turn before its heavy part: turns are given while no request of any other route is being answered,
 * and to one bulk answer at a time, in the order they were asked for; a turn waited for `maxMs` is
 * taken anyway, so that scanners are never starved however busy the gates are. A ticket use at the gate
 * then shares the event loop, the CPU and the sockets with at most the one page being sent when it
 * arrived, not with four scanners' pages, which go one after the other between the uses.
 */
export class RequestPrecedence {
  /** Requests of routes that do not yield, being answered now. */
  private open = 0
  /** Bulk answers holding a turn. */
  private bulk = 0
  private waiting: (() => void)[] = []
  /** Work that waits for no request to be open (`quiet`). */
  private idle: (() => void)[] = []
  /** When the last request closed (`now`'s milliseconds). */
  private closedAt = Number.NEGATIVE_INFINITY
  /** Gaps between requests so far (a gap starts when the last open request closes). */
  private gaps = 0
  /** The gap in which background work last went on while the instance was busy (`quiet`). */
  private givenIn = -1

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** A request that bulk answers yield to is being answered; `closed` once its answer closed. */
  opened(): void {
    this.open++
  }

  closed(): void {
    this.open--
    this.closedAt = this.now()
    if (this.open === 0) {
      this.gaps++
      const idle = this.idle.splice(0)
      if (idle.length > 0) this.givenIn = this.gaps
      for (const go of idle) go()
    }
    this.giveTurn()
  }

  /**
   * Resolves once no request of a route that does not yield is being answered, or after `maxMs`, with
   * whether the instance is busy: it answered one lately (one was open when asked, or closed less than
   * LATELY_MS before). Background work done in steps (a snapshot's build) takes each step between
   * requests, and shorter steps while the instance is busy. While busy, one step a gap between
   * requests: an ask in a gap that already gave one waits for the next gap (a step taken late in a gap
   * runs into the next request; at the bench's gate, half the steps did).
   */
  quiet(maxMs: number): Promise<boolean> {
    const busy = this.now() - this.closedAt < LATELY_MS
    if (this.open === 0 && !(busy && this.givenIn === this.gaps)) {
      if (busy) this.givenIn = this.gaps
      return Promise.resolve(busy)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.idle = this.idle.filter((w) => w !== go)
        resolve(true)
      }, maxMs)
      const go = () => {
        clearTimeout(timer)
        resolve(true)
      }
      this.idle.push(go)
    })
  }

  /**
   * Resolves once it is this bulk answer's turn (no other request being answered, no other bulk
   * answer holding one), or after `maxMs`, with the function that ends the turn (once the answer was
   * handed to the socket, or cut off).
   */
  turn(maxMs: number): Promise<() => void> {
    return new Promise((resolve) => {
      const take = () => {
        this.bulk++
        let ended = false
        resolve(() => {
          if (ended) return
          ended = true
          this.bulk--
          this.giveTurn()
        })
      }
      if (this.open === 0 && this.bulk === 0 && this.waiting.length === 0) return take()
      const timer = setTimeout(() => {
        this.waiting = this.waiting.filter((w) => w !== go)
        take()
      }, maxMs)
      const go = () => {
        clearTimeout(timer)
        take()
      }
      this.waiting.push(go)
    })
  }

  /** The next bulk answer in line goes when nothing else holds the instance. */
  private giveTurn(): void {
    if (this.open > 0 || this.bulk > 0) return
    this.waiting.shift()?.()
  }
}
