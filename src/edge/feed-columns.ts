import type { FeedCheckinList } from '../checkin/checkin.service.js'
import type { FeedRow, GatheredTickets } from '../transfers/transfers.store.js'

/** What a page in the compact encoding reads of a ticket (its ticket type's uid comes from `typeOf`). */
export type ColumnsRow = Pick<
  FeedRow,
  'transfer_uid' | 'code_version' | 'code_digest' | 'used_at' | 'used_gate'
>

/** The ticket type uid of a row of the feed (read with its ticket type). */
export const feedRowType = (r: FeedRow) => r.ticket_uid

/**
 * The compact encoding of a scan-sync page (`format=columns`), for a first sync of a festival's tickets
 * over a festival network: no per-ticket objects and no repeated strings. Each ticket is the first 64
 * bits of its transfer uid (16 hex characters; what a scanner keys its state by: the code it scans
 * carries the whole uid) and its code digest (22 characters), concatenated into two strings; ticket types
 * and gates are tables referred to by index; versions and uses are listed only for the tickets that have
 * them (most tickets of a first sync are version 1 and unused). About 40 bytes a ticket before
 * compression, and what compression cannot squeeze (random ids and digests) is all that is left.
 */
export interface ColumnsPage {
  format: 'columns'
  event_id: number
  key_ids: string[]
  /** Ticket type uids; `types[i]` is an index into this list. */
  ticket_types: string[]
  /** Gates of the uses; `used[k][2]` is an index into this list, or -1. */
  gates: string[]
  /** How many tickets the page holds. */
  count: number
  /** Per ticket, the first 16 hex characters of its transfer uid. */
  ids: string
  /** Per ticket, its code digest (22 characters), or 22 `~` when it has no code. */
  digests: string
  types: number[]
  /** `[i, version]` for the tickets whose code version is above 1 (re-issued). */
  versions: [number, number][]
  /** `[i, used at (epoch ms), gate index or -1]` for the used tickets. */
  used: [number, number, number][]
  cursor: string
  has_more: boolean
  /** With a page of changes: the event's time zone and live check-in lists. */
  timezone?: string
  checkin_lists?: FeedCheckinList[]
}

export const ID_CHARS = 16
export const DIGEST_CHARS = 22
export const NO_DIGEST = '~'.repeat(DIGEST_CHARS)

/** The index of `value` in a table (of strings, or of ticket type ids), added at the end when new. */
function indexIn<K>(table: Map<K, number>, value: K): number {
  let i = table.get(value)
  if (i === undefined) {
    i = table.size
    table.set(value, i)
  }
  return i
}

/** One page in the compact encoding; `typeOf` tells a row's ticket type uid. */
export function columnsPage<R extends ColumnsRow>(
  head: { event_id: number; key_ids: string[]; cursor: string; has_more: boolean },
  rows: readonly R[],
  typeOf: (row: R) => string,
): ColumnsPage {
  const typeIndex = new Map<string, number>()
  const gateIndex = new Map<string, number>()
  const ids: string[] = []
  const digests: string[] = []
  const types: number[] = []
  const versions: [number, number][] = []
  const used: [number, number, number][] = []
  rows.forEach((r, i) => {
    ids.push(r.transfer_uid.slice(0, ID_CHARS))
    digests.push(r.code_digest?.length === DIGEST_CHARS ? r.code_digest : NO_DIGEST)
    types.push(indexIn(typeIndex, typeOf(r)))
    if (r.code_version !== 1) versions.push([i, r.code_version])
    if (r.used_at !== null) {
      used.push([i, Number(r.used_at), r.used_gate === null ? -1 : indexIn(gateIndex, r.used_gate)])
    }
  })
  return {
    format: 'columns',
    event_id: head.event_id,
    key_ids: head.key_ids,
    ticket_types: [...typeIndex.keys()],
    gates: [...gateIndex.keys()],
    count: rows.length,
    ids: ids.join(''),
    digests: digests.join(''),
    types,
    versions,
    used,
    cursor: head.cursor,
    has_more: head.has_more,
  }
}

/**
 * A page of a first sync (a snapshot, or a continuation read after its snapshot was let go): its
 * cursor is `position.id` while another page follows, then the plain `position` the deltas start from.
 * `rows` holds up to `limit + 1` rows: the extra one only tells that another page follows.
 */
export function snapshotColumnsPage<R extends ColumnsRow & { id: number }>(
  head: { event_id: number; key_ids: string[]; position: number },
  rows: readonly R[],
  limit: number,
  typeOf: (row: R) => string,
): ColumnsPage {
  const page = rows.slice(0, limit)
  const more = rows.length > limit
  return columnsPage(
    {
      event_id: head.event_id,
      key_ids: head.key_ids,
      cursor: more ? `${head.position}.${page[page.length - 1]!.id}` : String(head.position),
      has_more: more,
    },
    page,
    typeOf,
  )
}

/** The columns of tickets gathered by the database: `types` index into `typeIds`, `used` into `gates`. */
export interface GatheredColumns {
  typeIds: number[]
  gates: string[]
  types: number[]
  versions: [number, number][]
  used: [number, number, number][]
}

/** Reads the per-ticket values of tickets gathered by the database (`ticketColumnsAfter`). */
export function gatheredColumns(gathered: GatheredTickets): GatheredColumns {
  const typeIndex = new Map<number, number>()
  const gateIndex = new Map<string, number>()
  const types: number[] = []
  const versions: [number, number][] = []
  const used: [number, number, number][] = []
  const values = gathered.count === 0 ? [] : gathered.tickets.split(',')
  for (let i = 0, k = 0; k < values.length; i++, k += 3) {
    types.push(indexIn(typeIndex, Number(values[k])))
    if (values[k + 1] !== '1') versions.push([i, Number(values[k + 1])])
    if (values[k + 2] !== '') {
      const gate = gathered.gates[used.length]
      used.push([i, Number(values[k + 2]), gate == null ? -1 : indexIn(gateIndex, gate)])
    }
  }
  return { typeIds: [...typeIndex.keys()], gates: [...gateIndex.keys()], types, versions, used }
}

/**
 * A page of a first-sync snapshot from its tickets gathered by the database (`ticketColumnsAfter`) and
 * their columns (`gatheredColumns`): the same page, byte for byte once encoded, as `snapshotColumnsPage`
 * makes of their rows. `typeOf` tells a ticket type id's uid.
 */
export function gatheredColumnsPage(
  head: { event_id: number; key_ids: string[]; position: number },
  gathered: GatheredTickets,
  columns: GatheredColumns,
  typeOf: (typeId: number) => string,
): ColumnsPage {
  return {
    format: 'columns',
    event_id: head.event_id,
    key_ids: head.key_ids,
    ticket_types: columns.typeIds.map(typeOf),
    gates: columns.gates,
    count: gathered.count,
    ids: gathered.ids,
    digests: gathered.digests,
    types: columns.types,
    versions: columns.versions,
    used: columns.used,
    cursor: gathered.more ? `${head.position}.${gathered.last}` : String(head.position),
    has_more: gathered.more,
  }
}
