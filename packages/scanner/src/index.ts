export {
  type Conflict,
  codeDigest,
  type QueuedScan,
  Scanner,
  ScannerError,
  type ScannerOptions,
  type ScannerState,
  type ScanResult,
  type SyncReport,
} from './scanner.js'
