// The fixed costs of every run (issue 25), as whole-process medians on this machine, the
// commands interleaved (A B C A B C ...) so a change in the machine's load hits all alike:
//   - the single binary (out/ichor, `npm run build:binary`) against the npm build for
//     `version`, `--help` and a cold `cni values validate -f FILE` (goal: the binary faster);
//   - `--help` against a bare `node -e 0` (goals: binary <= 1.3x, npm build <= 2x);
//   - a cold `cni values validate -f FILE` (render cache off) against a bare `helm template`
//     of the same chart and effective values, with the same flags ichor passes (goal <= 1.5x).
// The no-op `init` rerun ratio needs the harness: `ICHOR_BENCH_SIZES=1+1 npm run bench -- nodes`.
// ICHOR_BENCH_RUNS (default 15) runs of each; the load average is printed before and after.
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {loadavg, tmpdir} from 'node:os'
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

const USER = {hubble: {relay: {enabled: true}, ui: {enabled: true}}, operator: {replicas: 1}, bandwidthManager: {enabled: true}}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

/** user + sys of one run and its children, in ms, from bash's `times` (its second line: the children's). */
function cpu([file, args, input], env) {
  const r = spawnSync('bash', ['-c', '"$@" >/dev/null 2>&1 || exit $?; times', 'bench', file, ...args], {encoding: 'utf8', input, env})
  if (r.status !== 0) throw new Error(`bench: ${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  const secs = [...(r.stdout.trim().split('\n')[1] ?? '').matchAll(/(\d+)m([\d.]+)s/g)].map(([, m, sec]) => Number(m) * 60 + Number(sec))
  if (secs.length !== 2) throw new Error(`bench: cannot read bash's times: ${r.stdout}`)
  return (secs[0] + secs[1]) * 1000
}

function once([file, args, input], env) {
  const t = performance.now()
  const r = spawnSync(file, args, {encoding: 'utf8', input, env, maxBuffer: 64 * 1024 * 1024})
  const ms = performance.now() - t
  if (r.status !== 0) throw new Error(`bench: ${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  return ms
}

export async function run(ctx) {
  const runs = Number(process.env.ICHOR_BENCH_RUNS ?? 15)
  const binary = process.env.ICHOR_BINARY ?? join(ctx.root, 'out', 'ichor')
  const hasBinary = existsSync(binary)
  if (!hasBinary) console.log(`no single binary at ${binary}: run \`npm run build:binary\` first (or set ICHOR_BINARY); its rows are left out`)
  const chart = join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz')
  const work = mkdtempSync(join(tmpdir(), 'ichor-bench-fixed-'))
  try {
    const valuesFile = join(work, 'values.yaml')
    writeFileSync(valuesFile, JSON.stringify(USER))
    const validateArgs = ['cni', 'values', 'validate', '-f', valuesFile, '--cilium-chart', chart]
    // The effective values and the helm arguments ichor renders with, read from the built code.
    const {ciliumEffectiveValues} = await import(join(ctx.root, 'dist', 'lib', 'cilium', 'effective.js'))
    const {ciliumRenderApiVersions} = await import(join(ctx.root, 'dist', 'lib', 'cilium', 'validate.js'))
    const facts = {kubeProxy: 'replaced', tunnel: 'vxlan'}
    const effective = ciliumEffectiveValues({chartPath: chart, user: USER, facts})
    const helmArgs = ['template', 'cilium', chart, '--namespace', 'kube-system', '--values', '-']
    for (const api of ciliumRenderApiVersions(facts)) helmArgs.push('--api-versions', api)
    const env = {...process.env, ICHOR_RENDER_CACHE: 'off', NODE_ENV: '', CI: ''}
    const node = process.execPath
    const commands = {
      floor: [node, ['-e', '0']],
      'npm --help': [node, [ctx.bin, '--help']],
      'npm version': [node, [ctx.bin, 'version']],
      'npm validate': [node, [ctx.bin, ...validateArgs]],
      'helm template': [process.env.ICHOR_HELM, helmArgs, JSON.stringify(effective)],
      ...(hasBinary ? {'bin --help': [binary, ['--help']], 'bin version': [binary, ['version']], 'bin validate': [binary, validateArgs]} : {}),
    }
    const times = Object.fromEntries(Object.keys(commands).map((k) => [k, []]))
    const cpus = Object.fromEntries(Object.keys(commands).map((k) => [k, []]))
    console.log(`load average before: ${load()}`)
    for (const c of Object.values(commands)) once(c, env) // warms the page cache (the binary is 100 MB)
    for (let i = 0; i < runs; i++) for (const [name, c] of Object.entries(commands)) times[name].push(once(c, env))
    // The CPU time (user + sys, helm's included) in runs of their own: it moves less with the load than the wall time.
    for (let i = 0; i < runs; i++) for (const [name, c] of Object.entries(commands)) cpus[name].push(cpu(c, env))
    const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]))
    const mc = Object.fromEntries(Object.entries(cpus).map(([k, v]) => [k, median(v)]))
    console.log(`medians of ${runs} interleaved runs (wall; CPU = user + sys in separate runs):`)
    for (const [name, v] of Object.entries(times)) {
      console.log(`  ${name.padEnd(14)} wall ${fmtMs(m[name]).padStart(8)} (min ${fmtMs(Math.min(...v))})   cpu ${fmtMs(mc[name]).padStart(8)}`)
    }
    const ratio = (a, b) => [m[a] / m[b], mc[a] / mc[b]]
    const rows = [
      ['`npm --help` / `node -e 0`', ratio('npm --help', 'floor'), 2],
      ['cold validate (npm) / `helm template`', ratio('npm validate', 'helm template'), 1.5],
    ]
    if (hasBinary) {
      rows.push(
        ['`bin --help` / `node -e 0`', ratio('bin --help', 'floor'), 1.3],
        ['binary / npm: version', ratio('bin version', 'npm version'), 1],
        ['binary / npm: --help', ratio('bin --help', 'npm --help'), 1],
        ['binary / npm: validate', ratio('bin validate', 'npm validate'), 1],
        ['cold validate (binary) / `helm template`', ratio('bin validate', 'helm template'), 1.5],
      )
    }
    console.log('ratio of medians                            wall     cpu    goal (on wall)')
    for (const [label, [w, c], goal] of rows) {
      const strict = label.startsWith('binary / npm')
      const ok = strict ? w < goal : w <= goal
      console.log(
        `  ${label.padEnd(42)} ${w.toFixed(2).padStart(5)}x  ${c.toFixed(2).padStart(5)}x   ${strict ? '<' : '<='} ${goal}x ${ok ? 'met' : 'NOT met'}`,
      )
    }
    console.log(`load average after: ${load()}`)
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}
