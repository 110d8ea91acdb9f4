#!/usr/bin/env node
// `npm run bench`: prints numbers (it asserts nothing but the cni section's "no Helm revision"). Sections:
//   cli     start-up: `ichor --help` and `ichor version` medians
//   binary  the single binary's `--help` start-up against `node bin/run.js --help`, and its size
//   fixed   the fixed costs of every run (issue 25): binary vs npm build, --help vs `node -e 0`,
//           cold validate vs `helm template`, medians of interleaved runs with the load average
//   values  warm per-call Cilium validation (no helm render) and its heap growth,
//           cold `ichor cni values validate` wall time, `ichor --help` wall time
//   input   verdict time for a 64 KiB values file, a 10 MB one, a file full of keys, an alias bomb
//   stack   Argo CD render + bundle, bundle sizes, push time to a local registry
//   yaml    parse and emit of the Argo CD render per YAML library (the choice of library)
//   e2e     first ichor init vs no-op rerun on the harness, peak RSS of the CLI
//   stack-day2  `stack status`, a no-op `stack sync` and `stack values set` on the harness
//   cni     cni status, a no-op cni values set, cni values diff on the harness
//   status  `ichor status` on a 3+2 harness, with and without a talosconfig
//   nodes   the node-count curve: 1+1 to 3+30, wall/CPU/RSS, talosctl calls and API requests per node
//   talos-upgrade  ichor's own time per node on top of talosctl upgrade's, on a 3+2 harness
// `node bench/run.mjs values stack` runs only the sections named.
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {ensureHelm} from '../scripts/ensure-helm.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const upstream = process.env.ICHOR_UPSTREAM ?? resolve(root, '..', 'shared', 'upstream')
process.env.ICHOR_HELM ??= ensureHelm().path
// Real helm renders unless a section measures the render cache on purpose.
process.env.ICHOR_RENDER_CACHE = 'off'
const wanted = process.argv.slice(2)
const sections =
  wanted.length > 0 ? wanted : ['cli', 'binary', 'fixed', 'values', 'input', 'stack', 'e2e', 'stack-day2', 'cni', 'status', 'nodes', 'talos-upgrade']

const ctx = {root, upstream, bin: join(root, 'bin', 'run.js')}

for (const name of sections) {
  const mod = await import(`./${name}.mjs`)
  console.log(`\n== ${name} ==`)
  await mod.run(ctx)
}
