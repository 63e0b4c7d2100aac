import { pathToFileURL } from 'node:url'

/**
 * Who may call which protected route: the one table that src/security/access-matrix.test.ts runs
 * against the service and docs/access-matrix.md is generated from
 * (`npm run --silent access-matrix`, which also lets Biome align the Markdown table).
 *
 * A cell is the expected HTTP status of a minimal valid call. On routes that concern an event the
 * cell is `own|other`: the call about event 1 (every event-bound role below belongs to event 1),
 * then the same call about event 2. `200 USED` also names the per-scan result of a batch upload.
 */
export const ROLES = [
  'admin',
  'superadmin',
  'network_manager',
  'operator',
  'consumer',
  'device',
  'event_client',
  'none',
] as const
export type MatrixRole = (typeof ROLES)[number]

/** How each role signs in; event 1 is its own event. */
export const ROLE_DESCRIPTIONS: Record<MatrixRole, string> = {
  admin: 'administrator of event 1 (access token from POST /auth/login)',
  superadmin: 'superadmin (every event)',
  network_manager: 'network manager of event 1',
  operator: 'operator of event 1 with pos:sell and ticket:scan there',
  consumer: 'consumer (POST /auth/login/customer)',
  device: 'offline device token of event 1 (POST /auth/login/device, with its device key)',
  event_client: 'API key of event 1 with api:read and api:write (wb_…)',
  none: 'no credential',
}

export interface AccessRow {
  /** `METHOD /path` exactly as in /openapi.json. */
  route: string
  /** One cell per role, in the order of ROLES. */
  cells: Record<MatrixRole, string>
  /** Why a cell may surprise a reader. */
  note?: string
}

function row(route: string, cells: string[], note?: string): AccessRow {
  if (cells.length !== ROLES.length)
    throw new Error(`${route}: ${cells.length} cells for ${ROLES.length} roles`)
  return {
    route,
    cells: Object.fromEntries(ROLES.map((role, i) => [role, cells[i]!])) as Record<MatrixRole, string>,
    ...(note ? { note } : {}),
  }
}

const ADMIN_ONLY = ['200', '200', '403', '403', '403', '401', '401', '401']
const CONSUMER_ONLY = ['403', '403', '403', '403', '200', '401', '401', '401']
const EVENT_ADMIN = ['200|403', '200|200', '403|403', '403|403', '403|403', '401|401', '401|401', '401|401']
/** The check-in lists of an event: its administrators, network managers and operators. */
const CHECKIN_STAFF = ['200|403', '200|200', '200|403', '200|403', '403|403', '401|401', '401|401', '401|401']
const PARTNER = ['401', '401', '401', '401', '401', '401']
/** The routes that create lasting credentials or accounts (src/security/mfa-credentials.test.ts). */
const FRESH_MFA = "while the administrator's MFA is on, 403 mfa_required without a fresh verification"

// biome-ignore format: the table is laid out in columns for reading
export const ACCESS_MATRIX: readonly AccessRow[] = [
  //                                                admin       superadmin  network_mgr operator    consumer    device      event_client none
  row('POST /auth/logout',                          ['200',     '200',      '200',      '200',      '200',      '401',      '401',      '401'],
    'Any access token, with a refresh token of the same subject; offline tokens and API keys have no session'),
  row('GET /admin/me', ADMIN_ONLY),
  row('POST /admin/mfa/setup', ADMIN_ONLY, 'Re-enrolment while MFA is on: 403 mfa_required without a fresh verification'),
  row('POST /admin/mfa/verify', ADMIN_ONLY),
  row('POST /admin/passkeys/registration/options', ADMIN_ONLY, `The administrator's own passkeys; ${FRESH_MFA} (or a passkey)`),
  row('POST /admin/passkeys/registration',          ['201',     '201',      '403',      '403',      '403',      '401',      '401',      '401'],
    `The authenticator's answer to the options; ${FRESH_MFA} (or a passkey)`),
  row('GET /admin/passkeys', ADMIN_ONLY),
  row('DELETE /admin/passkeys/{id}',                ['404',     '404',      '403',      '403',      '403',      '401',      '401',      '401'],
    `Only the administrator's own passkeys (this table's have none: 404); ${FRESH_MFA} (or a passkey)`),
  row('GET /admin/sensitive/ping',                  ['403',     '403',      '403',      '403',      '403',      '401',      '401',      '401'],
    'Administrators need a fresh MFA verification; the plain sign-in tokens of this table have none'),
  row('GET /admin/audit',                           ['403',     '200',      '403',      '403',      '403',      '401',      '401',      '401'],
    'Superadmins only'),
  row('GET /admin/dashboard-users',                 ['403',     '200',      '403',      '403',      '403',      '401',      '401',      '401'],
    'Superadmins only'),
  row('POST /admin/dashboard-users',                ['403',     '201',      '403',      '403',      '403',      '401',      '401',      '401'],
    `Superadmins only; ${FRESH_MFA}`),
  row('PATCH /admin/dashboard-users/{user_id}',     ['403',     '200',      '403',      '403',      '403',      '401',      '401',      '401'],
    `Superadmins only; ${FRESH_MFA}`),
  row('DELETE /admin/dashboard-users/{user_id}',    ['403',     '200',      '403',      '403',      '403',      '401',      '401',      '401'],
    `Superadmins only; ${FRESH_MFA}`),
  row('GET /dashboard/api/events/{event_id}/stats', ['401|401', '401|401',  '401|401',  '401|401',  '401|401',  '401|401',  '401|401',  '401|401'],
    'The dashboard page reads it with its session cookie; bearer tokens and API keys are not accepted'),
  row('GET /events/{event_id}/stats',               ['200|403', '200|200',  '200|403',  '403|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    'Needs reports:read at the event; access tokens only. The dashboard pages use a session cookie instead'),
  row('GET /events/{event_id}/scan-sync',           ['403|403', '403|403',  '403|403',  '200|403',  '403|403',  '200|403',  '401|401',  '401|401'],
    'Needs ticket:scan or sync:download at the event; access and offline tokens; a device without a device key: 403 device_key_required'),
  row('POST /events/{event_id}/checkin-lists',      ['201|403', '201|201',  '201|403',  '201|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    "The event's administrators and network managers (events:manage) and its operators; access tokens only"),
  row('GET /events/{event_id}/checkin-lists', CHECKIN_STAFF),
  row('PATCH /events/{event_id}/checkin-lists/{list_id}', CHECKIN_STAFF),
  row('DELETE /events/{event_id}/checkin-lists/{list_id}', CHECKIN_STAFF, 'Archives the list'),
  row('GET /events/{event_id}/checkin-lists/{list_id}/status', CHECKIN_STAFF),
  row('GET /events/{event_id}/checkins', CHECKIN_STAFF),
  row('POST /tokens/api-key', EVENT_ADMIN, `The key never expires: ${FRESH_MFA}`),
  row('DELETE /tokens/api-key/{key_id}', EVENT_ADMIN),
  row('GET /tokens/api-keys', EVENT_ADMIN),
  row('GET /tokens/check',                          ['200|403', '200|200',  '200|403',  '200|403',  '200|200',  '401|401',  '401|401',  '401|401'],
    "For gateways, asked with `?event=`: the token must reach the event (a consumer's grant is for every event); access tokens only unless `type` allows others (docs/gateways.md)"),
  row('POST /oauth2/introspect', ['401', '401', '401', '401', '401', '401', '401', '401'],
    'Only a verify credential (an API key with scope tokens:verify, as Bearer or api_key) is let in; none of these roles holds one, not even an API key with api:read and api:write'),
  row('POST /tokens/offline',                       ['200|403', '200|200',  '403|403',  '200|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    `The token lives for days: ${FRESH_MFA}`),
  row('POST /devices/{device_id}/token',            ['200|403', '200|200',  '403|403',  '200|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    `The device's event decides; an offline token is not an access token; ${FRESH_MFA}`),
  row('POST /devices/{device_id}/revoke',           ['200|403', '200|200',  '403|403',  '403|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    "Administrators of the device's event; the device's offline tokens end on every instance, audited"),
  row('POST /devices/{device_id}/setup-code',       ['200|403', '200|200',  '403|403',  '403|403',  '403|403',  '401|401',  '401|401',  '401|401'],
    `Administrators of the device's event; the code it answers is exchanged once at POST /devices/setup; ${FRESH_MFA}`),
  row('GET /consumers/me', CONSUMER_ONLY),
  row('PATCH /consumers/me', CONSUMER_ONLY),
  row('GET /consumers/me/tickets', CONSUMER_ONLY),
  row('GET /consumers/me/wallets', CONSUMER_ONLY),
  row('POST /holder/links/{token}/claim', CONSUMER_ONLY),
  row('POST /tickets/{transfer_uid}/use',           ['403|403', '403|403',  '403|403',  '200|403',  '403|403',  '403|403',  '401|401',  '401|401'],
    "Needs ticket:scan at the ticket's event; device tokens hold sync:upload, for batches"),
  row('POST /tickets/use-batch',                    ['403|403', '403|403',  '403|403',  '200 USED|200 FORBIDDEN', '403|403', '200 USED|200 FORBIDDEN', '401|401', '401|401'],
    'Answered per scan; a token that may scan nowhere is refused as a whole (a device without a device key: 403 device_key_required)'),
  //                                                 partner routes take the credential in the api_key header
  row('POST /companies/ticket',                     [...PARTNER.map((c) => `${c}|${c}`),        '201|403',  '401|401']),
  row('GET /companies/tickets',                     [...PARTNER.map((c) => `${c}|${c}`),        '200|403',  '401|401']),
  row('POST /companies/transfer',                   [...PARTNER.map((c) => `${c}|${c}`),        '201|403',  '401|401']),
  row('POST /companies/transfers',                  [...PARTNER.map((c) => `${c}|${c}`),        '200|403',  '401|401'],
    'Up to 500 transfers, each answered on its own'),
  row('GET /companies/transfer/{company_ticket_id}', [...PARTNER.map((c) => `${c}|${c}`),       '200|404',  '401|401'],
    "Another partner's transfer (of this event or another) is not found, not forbidden: its existence is not revealed"),
  row('POST /companies/transfer/{company_ticket_id}/reissue', [...PARTNER.map((c) => `${c}|${c}`), '200|404', '401|401'],
    "Another partner's transfer is not found"),
  row('PUT /companies/webhook',                     [...PARTNER,                                '200',      '401']),
  row('GET /companies/webhook',                     [...PARTNER,                                '200',      '401']),
  row('DELETE /companies/webhook',                  [...PARTNER,                                '200',      '401']),
  row('GET /companies/webhook/deliveries',          [...PARTNER,                                '200',      '401']),
  row('POST /companies/webhook/deliveries/{id}/retry', [...PARTNER.map((c) => `${c}|${c}`),     '202|404',  '401|401'],
    "Another partner's delivery is not found"),
]

/** The table as Markdown, for docs/access-matrix.md. */
export function renderMarkdown(): string {
  const lines = [
    '# Access-control matrix',
    '',
    'Generated from `src/security/access-matrix.ts` by `npm run --silent access-matrix`;',
    '`src/security/access-matrix.test.ts` runs every cell against the service (SQLite and PostgreSQL) and fails',
    'when a protected route of `/openapi.json` has no row, or when this file says something else than the table.',
    '',
    'A cell is the HTTP status of a minimal valid call. `own / other`: the call about event 1 (the',
    "roles' own event), then about event 2. Order of checks: 429, 401, 422, 403, 404, 409.",
    '',
    '| role | who |',
    '|---|---|',
    ...ROLES.map((r) => `| ${r} | ${ROLE_DESCRIPTIONS[r]} |`),
    '',
    `| route | ${ROLES.join(' | ')} | note |`,
    `|---|${ROLES.map(() => '---').join('|')}|---|`,
    ...ACCESS_MATRIX.map(
      (r) =>
        `| \`${r.route}\` | ${ROLES.map((role) => r.cells[role].replace('|', ' / ')).join(' | ')} | ${r.note ?? ''} |`,
    ),
    '',
  ]
  return lines.join('\n')
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  process.stdout.write(renderMarkdown())
