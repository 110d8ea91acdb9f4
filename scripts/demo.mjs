#!/usr/bin/env node
// The README's main job: a full `ichor init --dry-run` on an embedded default, offline.
// Artifacts come from the mirror directory (ICHOR_MIRROR, default ../shared/upstream);
// ichor says which file and version it used and whether it matches the pin.
import {spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {ensureHelm} from './ensure-helm.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const mirror = process.env.ICHOR_MIRROR ?? resolve(root, '..', 'shared', 'upstream')
const out = process.env.ICHOR_DEMO_OUT ?? join(root, 'out', 'dry-run')
if (!existsSync(mirror)) {
  console.error(`demo: no mirror directory at ${mirror}; set ICHOR_MIRROR to a folder holding the upstream charts`)
  process.exit(1)
}
const args = [
  join(root, 'bin', 'run.js'),
  'init',
  '--dry-run',
  '--output-dir',
  out,
  '--cluster-name',
  'homelab',
  '--endpoint',
  'https://192.0.2.10:6443',
  '--control-plane',
  '192.0.2.10',
  '--worker',
  '192.0.2.11',
  '--mirror',
  mirror,
  ...process.argv.slice(2),
]
// ICHOR_HELM, else helm 3.18+ on PATH, else a Helm 4 built from Go modules (scripts/ensure-helm.mjs).
let helm
try {
  helm = ensureHelm()
} catch (error) {
  console.error(error.message)
  process.exit(1)
}
const result = spawnSync(process.execPath, args, {stdio: 'inherit', env: {...process.env, ICHOR_HELM: helm.path}})
process.exit(result.status ?? 1)
