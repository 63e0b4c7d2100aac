export {
  type Conflict,
  codeDigest,
  readTicketCode,
  Scanner,
  ScannerError,
  type ScannerOptions,
  type ScanResult,
  type SyncReport,
  type TicketCodeClaims,
} from './scanner.js'
export { type DeviceCredentials, DeviceSession, parseSetupCode, setUpDevice } from './setup.js'
export type {
  LocalUse,
  QueuedScan,
  ScannerMeta,
  ScannerState,
  ScannerStorage,
  StoredScanner,
  TicketState,
  UsePatch,
} from './storage.js'
