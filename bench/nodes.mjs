// How ichor's cost grows with the cluster (issue: node-count curve). For each size (default
// 1+1, 3+2, 3+10, 3+30; `ICHOR_BENCH_SIZES=1+1,3+2` to choose) on the harness's real control
// plane with kwok nodes: first init, no-op init rerun, cni status, no-op cni values set, a real
// cni values set (agents rolled), cni kube-proxy replace (init runs with kube-proxy for it),
// stack status. For each: wall time, the CLI's own CPU time and peak RSS (getrusage of the node
// process, from bench/process-report.mjs), talosctl invocations per node (ichor's `-v` command
// events) and the API requests ichor itself made per node (the apiserver's audit log, by user
// agent; helm's requests are counted apart). The talosctl stand-in is a Node script: its
// per-call wall time is printed, so ichor's share of a talosctl-bound step can be read off.
import {mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {availableParallelism, loadavg, tmpdir} from 'node:os'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {fmtMs, median} from './lib.mjs'

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// Who made an API request, from its user agent: the harness's own parts are left out.
function family(userAgent = '') {
  if (/^kubectl/.test(userAgent)) return 'talosctl stand-in (kubectl)'
  if (/^helm|^Helm/.test(userAgent)) return 'helm'
  if (/kube-controller-manager|kube-scheduler|kwok|kube-apiserver/.test(userAgent)) return undefined
  if (/^ichor /.test(userAgent)) return 'ichor'
  // The harness's in-process parts (the Kokumi and Argo CD simulators, the pod-start simulator).
  if (/^node|undici|node-fetch/i.test(userAgent)) return undefined
  return `other (${userAgent.split(' ')[0]})`
}

function auditCounts(file, fromIso, toIso) {
  const counts = {}
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return counts
  }
  for (const line of text.split('\n')) {
    if (!line) continue
    const e = JSON.parse(line)
    const at = e.stageTimestamp ?? e.requestReceivedTimestamp
    if (at < fromIso || at > toIso) continue
    const f = family(e.userAgent)
    if (f) counts[f] = (counts[f] ?? 0) + 1
    // ichor's own requests by verb and resource, to tell a LIST from per-node GETs.
    if (f === 'ichor') {
      const r = e.objectRef ?? {}
      const what = `${e.verb} ${r.resource ?? e.requestURI?.split('?')[0]}${r.subresource ? `/${r.subresource}` : ''}`
      counts.byResource ??= {}
      counts.byResource[what] = (counts.byResource[what] ?? 0) + 1
    }
  }
  return counts
}

function readReports(dir) {
  const out = []
  for (const f of readdirSync(dir)) {
    try {
      out.push(JSON.parse(readFileSync(join(dir, f), 'utf8')))
    } catch {
      // written while read: skipped
    }
    rmSync(join(dir, f), {force: true})
  }
  return out
}

async function measureSize(ctx, controlPlanes, workers) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const work = mkdtempSync(join(tmpdir(), 'ichor-bench-nodes-'))
  const policy = join(work, 'audit-policy.yaml')
  const auditLog = join(work, 'audit.log')
  const reports = join(work, 'reports')
  writeFileSync(policy, AUDIT_POLICY)
  const {mkdirSync} = await import('node:fs')
  mkdirSync(reports)
  const h = await startHarnessCluster({
    controlPlanes,
    workers,
    apiServerArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditLog}`, '--audit-log-mode=blocking', '--audit-log-format=json'],
  })
  const nodes = controlPlanes + workers
  h.env.ICHOR_RENDER_CACHE = 'on'
  h.env.ICHOR_BENCH_REPORT_DIR = reports
  h.env.NODE_OPTIONS = `${h.env.NODE_OPTIONS ?? ''} --import=${pathToFileURL(join(ctx.root, 'bench', 'process-report.mjs')).href}`.trim()
  const day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
  const chart = ['--cilium-chart', join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz')]
  const rows = []
  let lastTalosctl = []
  let standIn
  // Commands that run steps take --json (events on stderr); read commands take -o json.
  const measure = async (label, args, json = ['--json']) => {
    readReports(reports)
    const from = new Date().toISOString()
    const r = await runIchor([...args, ...json, '-v'], h.env)
    // The audit backend writes asynchronously even in blocking mode's batch: give it a moment.
    await new Promise((res) => setTimeout(res, 300))
    const to = new Date().toISOString()
    if (r.code !== 0) throw new Error(`${controlPlanes}+${workers} ${label} exited ${r.code}: ${r.stderr.slice(-2000)}`)
    const events = r.stderr.split('\n').flatMap((l) => {
      try {
        return [JSON.parse(l)]
      } catch {
        return []
      }
    })
    // `-v` names each external command: a JSON event, or a `  $ talosctl …` line without --json.
    const talosctl = [
      ...events.filter((e) => e.event === 'command' && /talosctl/.test(String(e.argv?.[0] ?? ''))),
      ...r.stderr.split('\n').filter((l) => /^\s*\$ \S*talosctl/.test(l)),
    ]
    const procs = readReports(reports)
    const cli = procs.find((p) => p.argv.some((a) => /bin[/\\]run\.js$/.test(a)))
    const api = auditCounts(auditLog, from, to)
    lastTalosctl = events.filter((e) => e.event === 'command' && /talosctl/.test(String(e.argv?.[0] ?? ''))).map((e) => e.argv)
    rows.push({
      size: `${controlPlanes}+${workers}`,
      label,
      ms: r.ms,
      cpuMs: cli?.cpuMs,
      rssMb: cli ? cli.maxRssKb / 1024 : undefined,
      talosctlPerNode: talosctl.length / nodes,
      apiPerNode: (api.ichor ?? 0) / nodes,
      api,
    })
  }
  try {
    // The harness's 120 s per wait is for tests; 30 nodes on a shared machine need longer.
    h.initArgs = h.initArgs.map((a, i, all) => (all[i - 1] === '--timeout' ? '900' : a))
    await measure('first init', [...h.initArgs, '--kube-proxy', 'kube-proxy'])
    await measure(
      'no-op init rerun',
      h.initArgs.filter((a, i, all) => !(a === '--kube-proxy' || all[i - 1] === '--kube-proxy')),
    )
    // The stand-in's own cost per call: the rerun's first read, run again 5 times as ichor ran it.
    const read = lastTalosctl.find((argv) => argv.includes('get') || argv.includes('read'))
    if (read) {
      const {spawnSync} = await import('node:child_process')
      const ms = []
      for (let i = 0; i < 5; i++) {
        const t = performance.now()
        spawnSync(read[0], read.slice(1), {env: h.env, stdio: 'ignore'})
        ms.push(performance.now() - t)
      }
      standIn = {argv: read.slice(1, 4).join(' '), ms: median(ms)}
      // The rerun's talosctl calls replayed alone, as many at once as ichor runs them: the
      // harness's share of the rerun's wall time (on a laptop these are Go processes and TLS).
      const {TALOSCTL_PARALLELISM} = await import(pathToFileURL(join(ctx.root, 'dist', 'lib', 'talos', 'talosctl.js')).href)
      const {spawn} = await import('node:child_process')
      const queue = [...lastTalosctl]
      const t = performance.now()
      await Promise.all(
        Array.from({length: TALOSCTL_PARALLELISM}, async () => {
          for (let argv = queue.shift(); argv; argv = queue.shift()) {
            await new Promise((res) => spawn(argv[0], argv.slice(1), {env: h.env, stdio: 'ignore'}).on('close', res))
          }
        }),
      )
      standIn.replay = {calls: lastTalosctl.length, ms: performance.now() - t, parallel: TALOSCTL_PARALLELISM}
    }
    await measure('cni status', ['cni', 'status', ...day2], ['-o', 'json'])
    await measure('no-op cni values set', ['cni', 'values', 'set', '--yes', ...day2, ...chart])
    await measure('cni values set (agents rolled)', ['cni', 'values', 'set', 'bpf.monitorAggregation=low', '--yes', '--timeout', '300', ...day2, ...chart])
    await measure('cni kube-proxy replace', ['cni', 'kube-proxy', 'replace', '--yes', '--timeout', '300', ...day2, ...chart])
    await measure(
      'stack status',
      ['stack', 'status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint],
      ['-o', 'json'],
    )
  } finally {
    await h.stop()
    rmSync(work, {recursive: true, force: true})
  }
  return {rows, standIn}
}

export async function run(ctx) {
  const sizes = (process.env.ICHOR_BENCH_SIZES ?? '1+1,3+2,3+10,3+30').split(',').map((s) => s.split('+').map(Number))
  const all = []
  for (const [cp, w] of sizes) {
    const {rows, standIn} = await measureSize(ctx, cp, w)
    all.push(...rows)
    if (standIn)
      console.log(
        `[${cp}+${w}] the talosctl stand-in (a Node script) takes ${fmtMs(standIn.ms)} per call (\`talosctl ${standIn.argv} …\`, median of 5); ` +
          `the no-op rerun's ${standIn.replay.calls} calls replayed alone, ${standIn.replay.parallel} at once: ${fmtMs(standIn.replay.ms)}`,
      )
    console.log(
      `[${cp}+${w}] done; load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} on ${availableParallelism()} cores`,
    )
  }
  const num = (x, d = 0) => (x === undefined ? '-' : x.toFixed(d))
  console.log('\n| size | command | wall | CLI CPU | CLI peak RSS | talosctl calls/node | ichor API requests/node | helm API requests |')
  console.log('|---|---|---|---|---|---|---|---|')
  for (const r of all) {
    console.log(
      `| ${r.size} | ${r.label} | ${fmtMs(r.ms)} | ${num(r.cpuMs)} ms | ${num(r.rssMb)} MB | ${num(r.talosctlPerNode, 2)} | ${num(r.apiPerNode, 1)} | ${r.api.helm ?? 0} |`,
    )
  }
  const at = (size, label) => all.find((r) => r.size === size && r.label === label)?.ms
  const ratio = (label, goal) => {
    const small = at('3+2', label)
    const big = at('3+30', label)
    if (small && big) console.log(`${label}: 3+30 / 3+2 = ${(big / small).toFixed(2)}x   goal <= ${goal}x`)
  }
  for (const r of all.filter((x) => x.label === 'no-op init rerun')) {
    const top = Object.entries(r.api.byResource ?? {}).sort((a, b) => b[1] - a[1])
    console.log(`[${r.size}] the no-op rerun's API requests by ichor: ${top.map(([k, n]) => `${k} ${n}`).join(', ')}`)
  }
  ratio('no-op init rerun', 1.5)
  ratio('cni status', 1.3)
  ratio('first init', 2)
  for (const size of new Set(all.map((r) => r.size))) {
    const first = at(size, 'first init')
    const rerun = at(size, 'no-op init rerun')
    if (first && rerun)
      console.log(`no-op init rerun / first init at ${size}: ${((100 * rerun) / first).toFixed(1)} %${size === '1+1' ? '   goal <= 7 %' : ''}`)
  }
  const peak = Math.max(...all.filter((r) => r.size === '3+30').map((r) => r.rssMb ?? 0))
  if (peak > 0) console.log(`peak RSS of the CLI at 3+30: ${peak.toFixed(0)} MB   goal < 200 MB`)
}
