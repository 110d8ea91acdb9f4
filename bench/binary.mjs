// Start-up of the single binary (`npm run build:binary`, out/ichor) against the npm build:
// `ichor --help` median of each (goal: the binary <= 150 ms and faster than
// `node bin/run.js --help`), beside a bare `node -e 0` so a loaded machine shows in the
// numbers, with the load average before and after. The runs alternate so a change in the
// machine's load hits all alike. The CPU time (user + sys, read with bash's `times` in
// separate runs) moves less with the load than the wall time does.
import {spawnSync} from 'node:child_process'
import {existsSync, statSync} from 'node:fs'
import {loadavg} from 'node:os'
import {join} from 'node:path'
import {fmtMB, fmtMs, median} from './lib.mjs'

function once(file, args) {
  const t = performance.now()
  const r = spawnSync(file, args, {encoding: 'utf8'})
  const ms = performance.now() - t
  if (r.status !== 0) throw new Error(`bench: ${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  return ms
}

/** user + sys of one run, in ms, from bash's `times` (its second line: the children's). */
function cpu(file, args) {
  const r = spawnSync('bash', ['-c', '"$@" >/dev/null 2>&1 || exit $?; times', 'bench', file, ...args], {encoding: 'utf8'})
  if (r.status !== 0) throw new Error(`bench: ${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  const children = r.stdout.trim().split('\n')[1] ?? ''
  const secs = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map(([, m, s]) => Number(m) * 60 + Number(s))
  if (secs.length !== 2) throw new Error(`bench: cannot read bash's times: ${r.stdout}`)
  return (secs[0] + secs[1]) * 1000
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

export async function run(ctx) {
  const binary = process.env.ICHOR_BINARY ?? join(ctx.root, 'out', 'ichor')
  if (!existsSync(binary)) {
    console.log(`no single binary at ${binary}: run \`npm run build:binary\` first (or set ICHOR_BINARY)`)
    return
  }
  const runs = Number(process.env.ICHOR_BENCH_RUNS ?? 21)
  const commands = {
    floor: [process.execPath, ['-e', '0']],
    binary: [binary, ['--help']],
    npm: [process.execPath, [ctx.bin, '--help']],
  }
  const times = {floor: [], binary: [], npm: []}
  const cpuTimes = {floor: [], binary: [], npm: []}
  console.log(`load average before: ${load()}`)
  // One untimed run of each warms the page cache (the binary is 100 MB).
  for (const [file, args] of Object.values(commands)) once(file, args)
  for (let i = 0; i < runs; i++) for (const [name, [file, args]] of Object.entries(commands)) times[name].push(once(file, args))
  for (let i = 0; i < runs; i++) for (const [name, [file, args]] of Object.entries(commands)) cpuTimes[name].push(cpu(file, args))
  const line = (label, name, goal = '') =>
    console.log(
      `${label} (${runs} runs): median ${fmtMs(median(times[name]))}, min ${fmtMs(Math.min(...times[name]))}, cpu median ${fmtMs(median(cpuTimes[name]))}${goal}`,
    )
  console.log(`binary ${binary}: ${fmtMB(statSync(binary).size)}`)
  line('`node -e 0`                ', 'floor', "   (the machine's floor)")
  line('`out/ichor --help`         ', 'binary', '   goal <= 150 ms, faster than the npm build')
  line('`node bin/run.js --help`   ', 'npm')
  console.log(
    `binary / npm median: ${(median(times.binary) / median(times.npm)).toFixed(2)}; above the floor: binary ${fmtMs(median(times.binary) - median(times.floor))}, npm ${fmtMs(median(times.npm) - median(times.floor))}`,
  )
  console.log(`load average after: ${load()}`)
}
