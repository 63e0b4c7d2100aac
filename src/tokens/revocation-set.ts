/**
 * The revocation list as each instance holds it in memory: a jti is kept as a 64-bit digest
 * (two signed 32-bit halves, `digestHi` and `digestLo`) with its expiry in whole seconds, 12 bytes an entry, in
 * typed arrays sorted by digest and searched by bisection; about 12 MB for a million live revocations
 * where a Map of the jti strings took about 165 MB. What is added after the load goes into a small Map
 * of strings (`recent`), merged into the arrays when it grows or when expired entries are swept.
 *
 * A jti that is not revoked and shares the 64-bit digest of a live revocation would be refused: with a
 * million live revocations that is one chance in about 18 million million per look-up.
 */
export class RevocationSet {
  private hi: Int32Array = new Int32Array(0)
  private lo: Int32Array = new Int32Array(0)
  /** Expiry in seconds since the epoch, rounded up (an entry may be kept up to a second longer). */
  private exp: Uint32Array = new Uint32Array(0)
  private readonly recent = new Map<string, number>()

  /** Entries held: the arrays' and the recent ones (a jti in both counts twice until the next merge). */
  get size(): number {
    return this.hi.length + this.recent.size
  }

  has(jti: string): boolean {
    if (this.recent.has(jti)) return true
    if (this.hi.length === 0) return false
    return find(this.hi, this.lo, digestHi(jti), digestLo(jti)) >= 0
  }

  /** Adds a revocation that expires at `expiresAt` (ms), unless it has expired at `now`. */
  add(jti: string, expiresAt: number, now: number): void {
    if (expiresAt <= now) return
    const known = this.recent.get(jti)
    if (known === undefined || known < expiresAt) this.recent.set(jti, expiresAt)
  }

  /**
   * Replaces the arrays with `loaded` (the load at start), merged with what is held already. The
   * recent entries stay as they are.
   */
  install(loaded: RevocationSetBuilder, now: number): void {
    for (let i = 0; i < this.hi.length; i++) loaded.push(this.hi[i]!, this.lo[i]!, this.exp[i]!)
    this.setArrays(loaded.build(nowSeconds(now)))
  }

  /** The same with arrays sorted already (`build`, as the load's child process sends them). */
  installSorted(loaded: Sorted, now: number): void {
    if (this.hi.length === 0) {
      this.setArrays(loaded)
      return
    }
    const builder = new RevocationSetBuilder(loaded.hi.length + this.hi.length)
    for (let i = 0; i < loaded.hi.length; i++) builder.push(loaded.hi[i]!, loaded.lo[i]!, loaded.exp[i]!)
    this.install(builder, now)
  }

  /**
   * Drops expired entries and, when the recent ones are many (`mergeAbove`) or some in the arrays have
   * expired, rebuilds the arrays with the recent entries in them. Returns how many entries expired.
   */
  sweep(now: number, mergeAbove = 4096): number {
    let expired = 0
    for (const [jti, exp] of this.recent)
      if (exp <= now) {
        this.recent.delete(jti)
        expired++
      }
    const seconds = nowSeconds(now)
    let expiredInArrays = 0
    for (let i = 0; i < this.exp.length; i++) if (this.exp[i]! <= seconds) expiredInArrays++
    if (expiredInArrays === 0 && this.recent.size <= mergeAbove) return expired
    const builder = new RevocationSetBuilder(this.hi.length - expiredInArrays + this.recent.size)
    for (let i = 0; i < this.hi.length; i++) builder.push(this.hi[i]!, this.lo[i]!, this.exp[i]!)
    for (const [jti, exp] of this.recent) builder.add(jti, exp)
    this.recent.clear()
    this.setArrays(builder.build(seconds))
    return expired + expiredInArrays
  }

  /** Bytes held by the arrays (the recent Map aside). */
  arrayBytes(): number {
    return this.hi.byteLength + this.lo.byteLength + this.exp.byteLength
  }

  private setArrays(a: Sorted) {
    this.hi = a.hi
    this.lo = a.lo
    this.exp = a.exp
  }
}

/** Collects entries (a load's pages) into growing typed arrays; `build` sorts them. */
export class RevocationSetBuilder {
  private hi: Int32Array
  private lo: Int32Array
  private exp: Uint32Array
  private n = 0

  constructor(capacity = 65_536) {
    const c = Math.max(16, capacity)
    this.hi = new Int32Array(c)
    this.lo = new Int32Array(c)
    this.exp = new Uint32Array(c)
  }

  get length(): number {
    return this.n
  }

  /** Adds a jti expiring at `expiresAt` (ms). */
  add(jti: string, expiresAt: number): void {
    this.push(digestHi(jti), digestLo(jti), Math.min(0xffffffff, Math.ceil(expiresAt / 1000)))
  }

  /**
   * Adds a page read as `<expires_at> <jti>` lines (revocations.store.ts: liveRevocationLines), with no
   * string or object made per entry; `each` is given the jtis that start with `prefix` (the few that
   * also need their text). Returns how many entries the page held and its last (the next page starts
   * after it), or undefined for an empty page.
   */
  addLines(
    lines: string,
    prefix: string,
    each: (jti: string, expiresAt: number) => void,
  ): { count: number; expiresAt: number; jti: string } | undefined {
    let count = 0
    let expiresAt = 0
    let start = 0
    let end = 0
    for (let i = 0; i < lines.length; i = end + 1) {
      expiresAt = 0
      for (let c = lines.charCodeAt(i); c !== 32; c = lines.charCodeAt(++i)) {
        if (c < 48 || c > 57) throw new Error(`unreadable revocation line at ${i}`)
        expiresAt = expiresAt * 10 + (c - 48)
      }
      start = i + 1
      end = lines.indexOf('\n', start)
      if (end < 0) end = lines.length
      this.push(
        murmur(lines, SEED_HI, start, end),
        murmur(lines, SEED_LO, start, end),
        Math.min(0xffffffff, Math.ceil(expiresAt / 1000)),
      )
      if (lines.startsWith(prefix, start)) each(lines.slice(start, end), expiresAt)
      count++
    }
    return count === 0 ? undefined : { count, expiresAt, jti: lines.slice(start, end) }
  }

  push(hi: number, lo: number, exp: number): void {
    if (this.n === this.hi.length) {
      const c = this.n * 2
      this.hi = grow(this.hi, c)
      this.lo = grow(this.lo, c)
      this.exp = grow(this.exp, c)
    }
    this.hi[this.n] = hi
    this.lo[this.n] = lo
    this.exp[this.n] = exp
    this.n++
  }

  /**
   * The entries alive after `seconds`, sorted by digest, one per digest (the latest expiry), in arrays
   * of their exact size. A counting pass on the top 16 bits puts each entry in its bucket (the digests
   * are uniform: about 15 a bucket at a million), then an insertion sort orders each bucket.
   */
  build(seconds: number): Sorted {
    const { n } = this
    const starts = new Uint32Array(65_537)
    let live = 0
    for (let i = 0; i < n; i++)
      if (this.exp[i]! > seconds) {
        starts[bucket(this.hi[i]!) + 1]!++
        live++
      }
    for (let b = 1; b <= 65_536; b++) starts[b]! += starts[b - 1]!
    const hi = new Int32Array(live)
    const lo = new Int32Array(live)
    const exp = new Uint32Array(live)
    for (let i = 0; i < n; i++) {
      if (this.exp[i]! <= seconds) continue
      const at = starts[bucket(this.hi[i]!)]!++
      hi[at] = this.hi[i]!
      lo[at] = this.lo[i]!
      exp[at] = this.exp[i]!
    }
    // Every entry is in its bucket: an insertion sort moves each one within its bucket only.
    for (let i = 1; i < live; i++) {
      const h = hi[i]!
      const l = lo[i]!
      const e = exp[i]!
      let j = i - 1
      while (j >= 0 && (hi[j]! > h || (hi[j] === h && lo[j]! > l))) {
        hi[j + 1] = hi[j]!
        lo[j + 1] = lo[j]!
        exp[j + 1] = exp[j]!
        j--
      }
      hi[j + 1] = h
      lo[j + 1] = l
      exp[j + 1] = e
    }
    // One entry per digest, with the latest expiry.
    let out = 0
    for (let i = 0; i < live; i++) {
      if (out > 0 && hi[out - 1] === hi[i] && lo[out - 1] === lo[i]) {
        if (exp[i]! > exp[out - 1]!) exp[out - 1] = exp[i]!
        continue
      }
      hi[out] = hi[i]!
      lo[out] = lo[i]!
      exp[out] = exp[i]!
      out++
    }
    // The builder is spent: its arrays go now, not when the builder does.
    this.n = 0
    this.hi = new Int32Array(0)
    this.lo = new Int32Array(0)
    this.exp = new Uint32Array(0)
    if (out === live) return { hi, lo, exp }
    return { hi: hi.slice(0, out), lo: lo.slice(0, out), exp: exp.slice(0, out) }
  }
}

/**
 * The two halves of a jti's digest: MurmurHash3's mixing over the string's UTF-16 code units with two
 * seeds. Computed in place, so a look-up allocates nothing (the verify hot path, bench:alloc). The jtis
 * are the service's own (random, or an API key's or a device generation's number), not chosen by a
 * caller, so a hash built for spread, not against crafted collisions, is what fits.
 */
function digestHi(jti: string): number {
  return murmur(jti, SEED_HI, 0, jti.length)
}

function digestLo(jti: string): number {
  return murmur(jti, SEED_LO, 0, jti.length)
}

const SEED_HI = 0x9747b28c
const SEED_LO = 0x5bd1e995

/** The digest of `s` from `start` to `end` (exclusive): of a jti, or of one inside a page's lines. */
function murmur(s: string, seed: number, start: number, end: number): number {
  let h = seed | 0
  for (let i = start; i < end; i++) {
    let k = Math.imul(s.charCodeAt(i), 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    h ^= Math.imul(k, 0x1b873593)
    h = (h << 13) | (h >>> 19)
    h = (Math.imul(h, 5) + 0xe6546b64) | 0
  }
  h ^= end - start
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  // Signed: a small integer for V8 on 64-bit, so neither the digest nor a comparison allocates.
  return h | 0
}

function nowSeconds(now: number): number {
  return Math.floor(now / 1000)
}

/** Sorted arrays: digests compared as signed 32-bit integers, high half first. */
export interface Sorted {
  hi: Int32Array
  lo: Int32Array
  exp: Uint32Array
}

/** The counting pass's bucket of a digest: its top 16 bits, in the digests' signed order. */
function bucket(hi: number): number {
  return (hi >> 16) + 32_768
}

function grow<T extends Int32Array | Uint32Array>(a: T, capacity: number): T {
  const b = new (a.constructor as new (n: number) => T)(capacity)
  b.set(a)
  return b
}

/** The index of (h, l) in the sorted arrays, or -1. */
function find(hi: Int32Array, lo: Int32Array, h: number, l: number): number {
  let a = 0
  let b = hi.length - 1
  while (a <= b) {
    const m = (a + b) >>> 1
    const mh = hi[m]!
    if (mh < h || (mh === h && lo[m]! < l)) a = m + 1
    else if (mh === h && lo[m] === l) return m
    else b = m - 1
  }
  return -1
}
