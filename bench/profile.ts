/**
 * Summarises V8 CPU profiles (`node --cpu-prof`, or `BENCH_PROFILE=dir npm run bench`): where the
 * busy time of the server went, by function (self time) and by package or source file.
 * Usage: node --import tsx bench/profile.ts FILE_OR_DIR [top]
 *
 * When the folder holds the bench's `load-start.json` (the monotonic time the first load began), the
 * samples before it (start-up: module loading, migrations) are left out. Profiles of helper threads
 * (tsx's module loader) are skipped.
 */
import fs from 'node:fs'
import path from 'node:path'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
}
interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** The package (node_modules/x or @scope/x), node: built-in, source file or V8 bucket of a frame. */
function area(frame: CallFrame): string {
  const { url, functionName } = frame
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName}`
  const nm = url.lastIndexOf('node_modules/')
  if (nm >= 0) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/')
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!
  }
  if (url.startsWith('node:')) return url
  const src = url.indexOf('/src/')
  return src >= 0 ? url.slice(src + 1) : url
}

function summarise(file: string, top: number, fromUs: number): void {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  if (!process.env.PROFILE_ANY && !profile.nodes.some((n) => n.callFrame.url.includes('/src/'))) return
  const self = new Map<number, number>()
  let t = profile.startTime
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0
    t += dt
    if (t >= fromUs) self.set(id, (self.get(id) ?? 0) + dt)
  })
  const fns = new Map<string, number>()
  const areas = new Map<string, number>()
  // Inclusive: time with at least one frame of the package or file anywhere on the stack.
  const inclusive = new Map<string, number>()
  const stackAreas = new Map<number, Set<string>>()
  const areasOnStack = (id: number): Set<string> => {
    let set = stackAreas.get(id)
    if (!set) {
      const up = parent.get(id)
      set = new Set(up === undefined ? [] : areasOnStack(up))
      const frame = byId.get(id)!.callFrame
      if (frame.url) set.add(area(frame))
      stackAreas.set(id, set)
    }
    return set
  }
  let busy = 0
  let idle = 0
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame
    if (frame.functionName === '(idle)') {
      idle += us
      continue
    }
    busy += us
    // Code without a file (V8 built-ins, functions compiled at run time) is named after its caller.
    const caller = byId.get(parent.get(id) ?? -1)?.callFrame
    const where = frame.url
      ? `${area(frame)}:${frame.lineNumber + 1}`
      : caller && !frame.functionName.startsWith('(')
        ? `< ${caller.functionName || '(anonymous)'} ${caller.url ? area(caller) : ''}`
        : ''
    const key = `${frame.functionName || '(anonymous)'} ${where}`.trim()
    fns.set(key, (fns.get(key) ?? 0) + us)
    for (const a of areasOnStack(id)) inclusive.set(a, (inclusive.get(a) ?? 0) + us)
    areas.set(area(frame), (areas.get(area(frame)) ?? 0) + us)
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)} %`
  const list = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `  ${pct(us)}  ${k}`)
      .join('\n')
  console.log(`${path.basename(file)}: busy ${(busy / 1e6).toFixed(1)} s, idle ${(idle / 1e6).toFixed(1)} s`)
  console.log(`by package / file (self time, % of busy):\n${list(areas)}`)
  console.log(`by package / file (inclusive: on the stack, % of busy):\n${list(inclusive)}`)
  console.log(`by function (self time, % of busy):\n${list(fns)}\n`)
}

const target = process.argv[2]
if (!target) {
  console.error('usage: node --import tsx bench/profile.ts FILE_OR_DIR [top]')
  process.exit(2)
}
const top = Number(process.argv[3] ?? 25)
const files = fs.statSync(target).isDirectory()
  ? fs
      .readdirSync(target)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(target, f))
  : [target]
const marker = path.join(fs.statSync(target).isDirectory() ? target : path.dirname(target), 'load-start.json')
const fromUs = fs.existsSync(marker)
  ? (JSON.parse(fs.readFileSync(marker, 'utf8')) as { monotonic_us: number }).monotonic_us
  : 0
for (const f of files) summarise(f, top, fromUs)
