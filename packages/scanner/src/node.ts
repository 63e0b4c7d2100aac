import { createHash } from 'node:crypto'
import { Scanner, type ScannerOptions } from './scanner.js'

/** codeDigest with node:crypto: synchronous, no thread hop. */
export function nodeDigest(code: string): string {
  return createHash('sha256').update(code).digest('base64url').slice(0, 22)
}

/** A Scanner for Node (a gate PC, a Raspberry Pi): the same, with the faster digest. */
export function createNodeScanner(opts: ScannerOptions): Scanner {
  return new Scanner({ digest: nodeDigest, ...opts })
}
