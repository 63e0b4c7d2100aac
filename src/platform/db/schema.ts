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
  /** Last position handed out in the event's scanner sync feed (migration 012) */
  feed_seq: Generated<number>
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
  /** Active TOTP secret, sealed (platform/keys.ts); null until a first verify */
  mfa_secret: string | null
  /** Last time step accepted for the active secret */
  mfa_last_step: number | null
  /** Secret from the latest setup, not yet confirmed by a code */
  mfa_pending_secret: string | null
  mfa_pending_at: number | null
  /** The account's token generation (044): tokens minted under an older one are refused */
  token_generation: Generated<number>
}

export interface NetworkManagersTable {
  id: Generated<number>
  email: string
  password_hash: string
  event_ids: string
  created_at: number
  /** The account's token generation (044): tokens minted under an older one are refused */
  token_generation: Generated<number>
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
  /** The account's token generation (044): tokens minted under an older one are refused */
  token_generation: Generated<number>
}

export interface CustomersTable {
  id: Generated<number>
  phone: string | null
  password_hash: string | null
  email: string | null
  first_name: string | null
  last_name: string | null
  created_at: number
  /** 1 when the consumer typed the e-mail address in (not proven); 0 when an administrator or a verified provider set it */
  email_self_asserted: Generated<number>
  /** The account's token generation (044): tokens minted under an older one are refused */
  token_generation: Generated<number>
}

export interface DevicesTable {
  id: Generated<number>
  dev_mac: string
  event_id: number
  operator_id: number | null
  archived: number
  created_at: number
  /** SHA-256 (hex) of the device key; null for a key-less device */
  key_hash: string | null
  /** Generation of the offline tokens issued to the device; revoking them starts the next one */
  token_generation: Generated<number>
}

export interface DeviceSetupCodesTable {
  id: Generated<number>
  device_id: number
  /** SHA-256 (hex) of the one-time set-up code */
  code_hash: string
  /** Who created it (`admin:7`, `cli`) */
  created_by: string
  created_at: number
  expires_at: number
  /** When the one exchange that won took it; null while unused */
  used_at: number | null
}

export interface DashboardUsersTable {
  id: Generated<number>
  username: string
  password_hash: string
  event_ids: string
  /** The partner (by name, in each of its events) whose webhook deliveries it sees; null: none (023). */
  partner: string | null
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
  /** mfa_verified_at (epoch seconds) of the access tokens this family issues; null without MFA */
  mfa_verified_at: number | null
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
  /** PostgreSQL: the inserting transaction's id (set by the column's default); SQLite: 0. */
  tx: Generated<number>
}

export interface AuditSinkTable {
  name: string
  after_tx: number
  after_id: number
  failures: number
  last_error: string | null
  updated_at: number
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
  /** The partner the key belongs to (migration 015); null only for a key written by an older release */
  partner_id: number | null
}

/** A ticket partner of one event (migration 015): its keys, transfers, receiver and deliveries. */
export interface PartnersTable {
  id: Generated<number>
  event_id: number
  name: string
  created_at: number
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
  /** The W3C traceparent of the traced request that queued the job (043); null when none. */
  traceparent: string | null
}

/** One-time codes sent by SMS: phone login (`login`) and phone-ownership checks (`verify`). */
export interface PhoneCodesTable {
  id: Generated<number>
  purpose: string
  phone: string
  /** HMAC-SHA256 (hex) of purpose, phone and code */
  code_hash: string
  attempts: Generated<number>
  expires_at: number
  consumed_at: number | null
  created_at: number
}

/** Proofs of phone ownership (the `verification_token` of /verify/messaging/check), single use. */
export interface PhoneVerificationsTable {
  /** SHA-256 (hex) of the token */
  token_hash: string
  phone: string
  expires_at: number
  used_at: number | null
  created_at: number
}

/** Links of a consumer to an identity-provider account. */
export interface CustomerIdentitiesTable {
  id: Generated<number>
  customer_id: number
  issuer: string
  subject: string
  email: string | null
  created_at: number
  last_login_at: number
}

/** The operator session token of /devices/operator-token, one per operator until logout. */
export interface OperatorSessionsTable {
  user_id: number
  /** SHA-256 (hex) of the token, for look-up */
  token_hash: string
  /** The token encrypted with a key derived from the signing secret, to hand the same one out again */
  token_sealed: string
  created_at: number
}

export interface PasswordResetTokensTable {
  id: Generated<number>
  admin_id: number
  /** SHA-256 (hex) of the token; the token itself exists only in the e-mail */
  token_hash: string
  expires_at: number
  created_at: number
  used_at: number | null
}

/** Hourly quota of reset requests per submitted address (known or not), keyed by the address's SHA-256. */
export interface PasswordResetRequestsTable {
  address_hash: string
  /** JSON list of request times (epoch ms) within the last hour */
  times: string
  updated_at: number
}

export interface TicketTypesTable {
  id: Generated<number>
  uid: string
  event_id: number
  name: string
  /** minor units */
  price: number
  ticket_date: string
  created_at: number
}

/** Transfers to one address in one event, claimed together by one consumer. */
export interface HolderLinksTable {
  id: Generated<number>
  event_id: number
  /** lower-cased */
  email: string
  claimed_by: number | null
  claimed_at: number | null
  created_at: number
  updated_at: number
}

/** SHA-256 (hex) of each claim token sent for a link; the plaintext exists only in the e-mail. */
export interface HolderLinkTokensTable {
  token_hash: string
  link_id: number
  created_at: number
  /** When its link was claimed (migration 040); null while unclaimed. */
  claimed_at: number | null
}

export interface TransfersTable {
  id: Generated<number>
  uid: string
  event_id: number
  ticket_type_id: number
  company_ticket_id: string
  email: string
  /** minor units */
  balance: number
  /** minor units */
  promo_balance: number
  access_gate: string | null
  seat_number: string | null
  link_id: number
  customer_id: number | null
  /** TRANSFERRED, CLAIMED or USED */
  status: string
  mailed_at: number | null
  claimed_at: number | null
  used_at: number | null
  /** local time of the event, YYYY-MM-DDThh:mm:ss.SSS */
  used_timestamp: string | null
  used_gate: string | null
  created_at: number
  /** Version of the current ticket code; codes of lower versions are revoked */
  code_version: Generated<number>
  /** The signing input (`header.payload`) of the current ticket code; the signature is not stored */
  code_body: string | null
  /** Digest of the current ticket code that scanners match (edge/ticket-codes.ts) */
  code_digest: string | null
  /** Position of the transfer's latest change in its event's scanner sync feed */
  feed_seq: Generated<number>
  /** 1: the use was recorded at the service's time, the device's clock being outside the window */
  used_clock_adjusted: number | null
  /** 1: the use was a scan of a code version that had been re-issued (revoked) */
  used_revoked_code: number | null
  /** 1: the use was a scan of a code never issued for the ticket (migration 024) */
  used_unknown_code: number | null
  /** The partner that transferred the ticket (migration 015) */
  partner_id: number | null
}

/** Counters of a ticket type (migration 019, kept by triggers on transfers). */
export interface TicketCountsTable {
  ticket_type_id: number
  /** issued, claimed, used, balance or promo_balance (minor units) */
  measure: string
  event_id: number
  n: number
}

/** Uses of an event per gate: `-` for none, `+name` for a gate (migration 019). */
export interface GateUseCountsTable {
  event_id: number
  gate: string
  n: number
}

/** Uses of an event per 5-minute slot of `used_at` (floor(used_at / 300000), migration 019). */
export interface UseSlotCountsTable {
  event_id: number
  slot: number
  n: number
}

/** Webhook deliveries per event, status and whether tried (migration 019, kept by triggers). */
export interface DeliveryCountsTable {
  event_id: number
  status: string
  /** 0: no attempt yet, 1: tried */
  tried: number
  n: number
}

export interface WalletsTable {
  customer_id: number
  event_id: number
  /** minor units */
  balance: number
  /** minor units */
  promo_balance: number
  updated_at: number
}

export interface IdempotencyKeysTable {
  api_key_id: number
  key: string
  request_hash: string
  /** null while the first request is still being answered */
  status_code: number | null
  /** JSON of the first answer */
  response: string | null
  created_at: number
}

export interface WebhooksTable {
  id: Generated<number>
  event_id: number
  /** The partner whose receiver this is (one per partner, migration 015) */
  partner_id: number | null
  url: string
  /** Signing secret, sealed (platform/keys.ts); plain `whsec_…` in rows from before sealing */
  secret: string
  disabled_at: number | null
  disabled_reason: string | null
  created_at: number
  updated_at: number
}

export interface WebhookDeliveriesTable {
  id: Generated<number>
  /** the webhook-id header, the same on every attempt */
  uid: string
  event_id: number
  /** The partner notified (migration 015) */
  partner_id: number | null
  transfer_id: number | null
  /** the exact body that is signed and sent */
  payload: string
  /** pending, delivered or failed */
  status: string
  attempts: Generated<number>
  next_attempt_at: number | null
  delivered_at: number | null
  created_at: number
}

export interface WebhookAttemptsTable {
  id: Generated<number>
  delivery_id: number
  attempted_at: number
  url: string
  status_code: number | null
  duration_ms: number
  error: string | null
  response_body: string | null
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
  /** When the session's second factor (TOTP code or passkey) was given; null: password only (migration 020) */
  mfa_verified_at?: number | null
}

/** WebAuthn credentials (migration 020). */
export interface PasskeysTable {
  id: Generated<number>
  /** admin, dashboard_user or network_manager */
  subject_kind: string
  subject_id: number
  /** base64url, as the authenticator gave it */
  credential_id: string
  /** COSE public key, base64url */
  public_key: string
  /** the signature counter last seen */
  counter: number
  /** comma-separated transports the browser reported (usb, internal, hybrid, ...) */
  transports: string
  name: string
  aaguid: string
  backed_up: number
  created_at: number
  last_used_at: number | null
}

/** Challenges waiting for their answer; hashes only (migration 020). */
export interface WebauthnChallengesTable {
  /** SHA-256 (hex) of the flow token the asking session holds */
  flow_hash: string
  /** SHA-256 (hex) of the challenge */
  challenge_hash: string
  /** registration or authentication */
  purpose: string
  /** the account the challenge is for; null for a first-factor sign-in */
  subject_kind: string | null
  subject_id: number | null
  created_at: number
  expires_at: number
}

/** An event's check-in list (migration 045, docs/gate.md). Booleans 0/1, lists JSON. */
export interface CheckinListsTable {
  id: Generated<number>
  event_id: number
  /** The event's id on its default list, null on the others. */
  default_of: number | null
  name: string
  /** JSON array of ticket type uids; null: every type. */
  ticket_type_ids: string | null
  allow_multiple_entries: number
  allow_entry_after_exit: number
  /** JSON `[{"from", "until"}]` of event-local times; null: always. */
  windows: string | null
  /** Event-local `HH:MM`; null: never. */
  exit_all_at: string | null
  /** The latest `exit_all_at` moment (event-local) whose count-out was applied. */
  counted_out_until: string | null
  archived_at: number | null
  created_at: number
  updated_at: number
}

/** A scan on a check-in list, accepted or refused (migration 045). */
export interface CheckinsTable {
  id: Generated<number>
  event_id: number
  list_id: number
  /** null: no ticket of that uid */
  transfer_id: number | null
  transfer_uid: string
  /** entry or exit */
  direction: string
  /** accepted or refused */
  result: string
  reason: string | null
  /** 1: this accepted entry made the ticket USED */
  first_use: number | null
  /** epoch ms (the scan's time as recorded) */
  scanned_at: number
  /** event-local time of `scanned_at`, YYYY-MM-DDThh:mm:ss.SSS */
  local_at: string
  gate: string | null
  device_id: string | null
  /** role:sub of the token that scanned */
  actor: string
  /** 1: uploaded from an offline device */
  offline: number | null
  nonce: string | null
  created_at: number
}

/** Whether a ticket is inside a list's area (migration 045). */
export interface CheckinPresenceTable {
  list_id: number
  transfer_id: number
  /** event-local YYYY-MM-DDThh:mm:ss of the entry; null: out */
  inside_since: string | null
}

/** A list's counters (migration 045): entries, exits, inside, counted_out, refused:<reason>, hour:<YYYY-MM-DDThh>. */
export interface CheckinCountsTable {
  list_id: number
  measure: string
  n: number
}

export interface Database {
  checkin_lists: CheckinListsTable
  checkins: CheckinsTable
  checkin_presence: CheckinPresenceTable
  checkin_counts: CheckinCountsTable
  passkeys: PasskeysTable
  webauthn_challenges: WebauthnChallengesTable
  dashboard_sessions: DashboardSessionsTable
  password_reset_tokens: PasswordResetTokensTable
  password_reset_requests: PasswordResetRequestsTable
  ticket_types: TicketTypesTable
  holder_links: HolderLinksTable
  holder_link_tokens: HolderLinkTokensTable
  transfers: TransfersTable
  ticket_counts: TicketCountsTable
  gate_use_counts: GateUseCountsTable
  use_slot_counts: UseSlotCountsTable
  delivery_counts: DeliveryCountsTable
  wallets: WalletsTable
  idempotency_keys: IdempotencyKeysTable
  webhooks: WebhooksTable
  webhook_deliveries: WebhookDeliveriesTable
  webhook_attempts: WebhookAttemptsTable
  jobs: JobsTable
  event_clients: EventClientsTable
  partners: PartnersTable
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
  audit_sink: AuditSinkTable
  phone_codes: PhoneCodesTable
  phone_verifications: PhoneVerificationsTable
  customer_identities: CustomerIdentitiesTable
  operator_sessions: OperatorSessionsTable
  device_setup_codes: DeviceSetupCodesTable
}
