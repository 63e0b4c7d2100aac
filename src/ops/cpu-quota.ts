import fs from 'node:fs'
import os from 'node:os'

type ReadFile = (file: string) => string

const readText: ReadFile = (file) => fs.readFileSync(file, 'utf8')

function tryRead(read: ReadFile, file: string): string | undefined {
  try {
    return read(file).trim()
  } catch {
    return undefined
  }
}

/**
 * The CPU time this process may use, in CPUs, from its cgroup's quota (v2 `cpu.max`, v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or undefined when none is set. A container limited to
 * two CPUs on a 64-core host sees 64 cores through `os.availableParallelism()`, but only this says 2.
 */
export function cgroupCpuQuota(read: ReadFile = readText): number | undefined {
  // cgroup v2: "0::/path" in /proc/self/cgroup; the container's own cgroup is usually mounted as the root.
  const v2Path = /^0::(\/.*)$/m.exec(tryRead(read, '/proc/self/cgroup') ?? '')?.[1]
  const v2Files = ['/sys/fs/cgroup/cpu.max']
  if (v2Path && v2Path !== '/') v2Files.unshift(`/sys/fs/cgroup${v2Path}/cpu.max`)
  for (const file of v2Files) {
    const max = tryRead(read, file)
    if (max === undefined) continue
    const [quota, period] = max.split(/\s+/)
    if (quota === 'max') return undefined
    const cpus = Number(quota) / Number(period ?? 100_000)
    return Number.isFinite(cpus) && cpus > 0 ? cpus : undefined
  }
  for (const dir of ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct']) {
    const quota = Number(tryRead(read, `${dir}/cpu.cfs_quota_us`))
    const period = Number(tryRead(read, `${dir}/cpu.cfs_period_us`))
    if (Number.isFinite(quota) && Number.isFinite(period) && period > 0)
      return quota > 0 ? quota / period : undefined
  }
  return undefined
}

/**
 * How many worker processes fit: the CPUs this process may run on, capped by its cgroup quota
 * (rounded down, as a worker per partial CPU only adds contention), and at least one.
 */
export function availableCpus(quota: number | undefined = cgroupCpuQuota()): number {
  const cpus = os.availableParallelism()
  return Math.max(1, quota === undefined ? cpus : Math.min(cpus, Math.floor(quota)))
}
