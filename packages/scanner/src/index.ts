export type { CheckinDirection, CheckinRules } from './checkin-rules.js'
export {
  IndexedDbStorage,
  type IndexedDbStorageOptions,
  openIndexedDbStorage,
} from './indexeddb.js'
export {
  type Conflict,
  codeDigest,
  readTicketCode,
  Scanner,
  ScannerError,
  type ScannerOptions,
  type ScanOptions,
  type ScanPlace,
  type ScanResult,
  type SyncReport,
  type TicketCodeClaims,
} from './scanner.js'
export { type DeviceCredentials, DeviceSession, parseSetupCode, setUpDevice } from './setup.js'
export type {
  CheckinList,
  LocalScan,
  QueuedScan,
  ScannerMeta,
  ScannerState,
  ScannerStorage,
  StoredScanner,
  TicketState,
  UsePatch,
} from './storage.js'
