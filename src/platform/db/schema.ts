import type { Generated } from 'kysely'

/**
 * Table types of the one schema both SQLite and PostgreSQL carry. Times are epoch milliseconds,
 * booleans 0/1 and lists JSON or comma-separated text, because better-sqlite3 stores no Date or boolean.
 */
export interface EventsTable {
  id: number
  uid: string
  name: string
  timezone: string
  created_at: number
}

export interface AdministratorsTable {
  id: Generated<number>
  email: string
  password_hash: string
  /** admin or superadmin */
  role: string
  /** comma-separated event ids; empty on a superadmin means every event */
  event_ids: string
  is_two_factor_authentication_enabled: Generated<number>
  disabled: Generated<number>
  created_at: number
  updated_at: number
}

export interface NetworkManagersTable {
  id: Generated<number>
  email: string
  password_hash: string
  event_ids: string
  created_at: number
}

/** Operators ("users" in the original service). */
export interface UsersTable {
  id: Generated<number>
  email: string
  password_hash: string
  event_id: number | null
  mode: number
  /** JSON map of event id to scopes, or null for the baseline operator scopes */
  permissions: string | null
  created_at: number
}

export interface CustomersTable {
  id: Generated<number>
  phone: string | null
  password_hash: string | null
  email: string | null
  first_name: string | null
  last_name: string | null
  created_at: number
}

export interface DevicesTable {
  id: Generated<number>
  dev_mac: string
  event_id: number
  operator_id: number | null
  archived: number
  created_at: number
}

export interface DashboardUsersTable {
  id: Generated<number>
  username: string
  password_hash: string
  event_ids: string
  created_at: number
}

export interface RefreshTokensTable {
  jti: string
  family_id: string
  subject_kind: string
  subject_id: number
  expires_at: number
  created_at: number
  rotated_at: number | null
  revoked_at: number | null
}

export interface RevokedTokensTable {
  jti: string
  expires_at: number
  revoked_at: number
}

export interface AuditLogTable {
  id: Generated<number>
  at: number
  kind: string
  actor: string | null
  ip: string | null
  outcome: string
  detail: string | null
}

export interface EventClientsTable {
  id: Generated<number>
  event_id: number
  name: string
  /** JSON list of scopes */
  scopes: string
  /** SHA-256 (hex) of the key; null once revoked */
  token_hash: string | null
  /** First characters of the key, shown in listings to tell keys apart */
  key_prefix: string
  created_by: string | null
  created_at: number
  last_used_at: number | null
  revoked_at: number | null
}

export interface JobsTable {
  id: Generated<number>
  kind: string
  /** JSON */
  payload: string
  dedupe_key: string | null
  run_at: number
  attempts: Generated<number>
  locked_until: number | null
  last_error: string | null
  created_at: number
  done_at: number | null
  failed_at: number | null
}

/** Web dashboard sessions; the cookie value itself is never stored. */
export interface DashboardSessionsTable {
  /** SHA-256 (hex) of the cookie value */
  token_hash: string
  /** dashboard_user, admin or network_manager */
  subject_kind: string
  subject_id: number
  /** synchronizer token that every state-changing form of this session carries */
  csrf_token: string
  created_at: number
  last_seen_at: number
  expires_at: number
}

export interface Database {
  dashboard_sessions: DashboardSessionsTable
  jobs: JobsTable
  event_clients: EventClientsTable
  events: EventsTable
  administrators: AdministratorsTable
  network_managers: NetworkManagersTable
  users: UsersTable
  customers: CustomersTable
  devices: DevicesTable
  dashboard_users: DashboardUsersTable
  refresh_tokens: RefreshTokensTable
  revoked_tokens: RevokedTokensTable
  audit_log: AuditLogTable
}
