// The --json contract of every command that runs steps (issue 23 item 4, README "JSON output"),
// on one harness cluster after a real `ichor init --json` (the converged cluster's, test/harness/converged.ts): stdout is exactly one JSON document
// (the result), the step events are on stderr. The table walks the built oclif manifest: a
// command with the Lease flags (so a plan of steps) and no row here fails the first test.
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
import {defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, convergedInit, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {untaintControlPlanes} from '../support/control-plane-taint.js'
import {restoreArgs} from '../support/restore-args.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {declareMachine} from '../sim/simulated-nodes.js'

interface Case {
  /** The arguments after the command's words; `--json` and the cluster's flags are added. */
  args: () => string[]
  env?: () => NodeJS.ProcessEnv
  /** What the cluster needs first (run just before the case). */
  before?: () => Promise<void>
}

let h: HarnessCluster
let init: CliRun
let dir: string

/** An EDITOR that replaces the buffer with the file EDIT_WITH names. */
const editor = () => {
  const path = join(dir, 'editor.sh')
  writeFileSync(path, '#!/bin/sh\ncp "$EDIT_WITH" "$1"\n', {mode: 0o700})
  return path
}
const editWith = (name: string, yaml: string) => {
  writeFileSync(join(dir, name), yaml)
  return {EDITOR: editor(), VISUAL: '', EDIT_WITH: join(dir, name)}
}

const kubeconfig = () => ['--kubeconfig', join(h.stateDir, 'kubeconfig')]
const cni = () => [...kubeconfig(), '--state-dir', h.stateDir, '--cilium-chart', UPSTREAM.ciliumChart]
const stack = () => [...kubeconfig(), '--registry-endpoint', h.registry.endpoint, '--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', h.kokumiManifest]

// In run order: real runs where they are cheap, dry runs (whose probes still run against the cluster) otherwise.
const CASES: Record<string, Case> = {
  init: {args: () => []}, // the beforeAll run
  'cni:values:set': {args: () => ['podAnnotations.jsonContract=set', '--yes', ...cni()]},
  'cni:values:edit': {args: () => ['--yes', ...cni()], env: () => editWith('cni.yaml', 'podAnnotations:\n  jsonContract: edited\n')},
  'cni:kube-proxy:replace': {args: () => ['--yes', ...cni()]},
  'cni:kube-proxy:restore': {args: () => ['--dry-run', ...cni()]},
  'cni:upgrade': {args: () => ['--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--dry-run', ...kubeconfig(), '--state-dir', h.stateDir]},
  // The version the cluster runs (init's default with the 1.18.0 chart): a dry run that proves and changes nothing.
  'kubernetes:upgrade': {args: () => ['--to', defaultKubernetesVersion(undefined, '1.18.0'), '--dry-run', ...kubeconfig(), '--state-dir', h.stateDir]},
  'talos:upgrade': {args: () => ['--to', 'v1.14.2', '--dry-run', ...kubeconfig(), '--state-dir', h.stateDir]},
  'stack:sync': {args: () => ['--yes', ...stack()]},
  'stack:values:set': {args: () => ['argocd', '--yes', '--set', 'server.podAnnotations.jsonContract=set', ...stack()]},
  'stack:values:edit': {
    args: () => ['argocd', '--yes', ...stack()],
    env: () => editWith('argocd.yaml', 'server:\n  podAnnotations:\n    jsonContract: edited\n'),
  },
  'stack:promote': {args: () => ['argocd', '--yes', ...kubeconfig()]},
  'stack:promotion:set': {args: () => ['Automatic', '--dry-run', ...kubeconfig()]},
  'stack:repair-secrets': {args: () => ['--dry-run', ...kubeconfig()]},
  'credentials:renew': {args: () => ['--dry-run', ...kubeconfig(), '--state-dir', h.stateDir]},
  // A new machine in maintenance mode could take the worker's place (a dry run: nothing changes).
  'node:replace': {
    args: () => [h.workers[0]!, '127.0.0.46', '--dry-run', ...kubeconfig(), '--state-dir', h.stateDir],
    before: async () => declareMachine(h.nodes, {ip: '127.0.0.46', role: 'worker', talosVersion: 'v1.14.1'}),
  },
  // The 1+1 cluster's one worker could go once the control plane takes workloads (a dry run).
  'node:remove': {
    args: () => [h.workers[0]!, '--dry-run', ...kubeconfig(), '--state-dir', h.stateDir],
    before: async () => untaintControlPlanes(await connectKube({kubeconfig: h.cp.kubeconfigPath})),
  },
  // Last: the whole cluster lost, and brought back from a backup taken just before onto the same machines.
  restore: {
    args: () => restoreArgs(h, join(h.stateDir, '..', 'json-contract.ichor-backup'), join(h.stateDir, '..', 'restore-laptop')).slice(1),
    before: async () => {
      const backup = await runIchor(['backup', join(h.stateDir, '..', 'json-contract.ichor-backup'), ...kubeconfig(), '--state-dir', h.stateDir], h.env)
      if (backup.code !== 0) throw new Error(`backup failed: ${backup.stderr}`)
      await h.loseEverything()
    },
  },
}

const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, {flags: Record<string, unknown>}>}
/** A command that takes the Lease runs a plan of steps on the task engine. */
const STEP_COMMANDS = Object.keys(manifest.commands).filter((id) => 'break-lock' in manifest.commands[id]!.flags)

function events(text: string): Record<string, unknown>[] {
  return text.split('\n').flatMap((line) => {
    try {
      const e = JSON.parse(line) as unknown
      return e && typeof e === 'object' && 'event' in e ? [e as Record<string, unknown>] : []
    } catch {
      return []
    }
  })
}

function expectContract(id: string, run: CliRun): void {
  const why = `${id}: exit ${run.code}\n${run.stderr.slice(-3000)}\n${run.stdout.slice(-2000)}`
  expect(run.code, why).toBe(0)
  // Exactly one document: JSON.parse fails on a second one or on anything around it.
  const doc = JSON.parse(run.stdout) as Record<string, unknown>
  expect(doc.schemaVersion, why).toBe(1)
  expect(doc.event, why).toBeUndefined()
  const onStderr = events(run.stderr)
  expect(
    onStderr.find((e) => e.event === 'start'),
    why,
  ).toBeDefined()
  expect(
    onStderr.find((e) => e.event === 'task'),
    why,
  ).toBeDefined()
  expect(onStderr.at(-1), why).toMatchObject({event: 'end', ok: true})
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ichor-json-contract-'))
  // The converged cluster's own init --json run is the init case.
  h = await convergedCluster('1+1')
  init = await convergedInit('1+1')
}, CONVERGED_TIMEOUT_MS)
afterAll(async () => h?.stop())

describe('--json on the harness: one document on stdout, the step events on stderr', () => {
  it('every command that runs steps (takes the Lease, per oclif.manifest.json) has a case here', () => {
    expect(STEP_COMMANDS.length).toBeGreaterThan(10)
    expect(Object.keys(CASES).sort()).toEqual([...STEP_COMMANDS].sort())
  })

  for (const [id, kase] of Object.entries(CASES)) {
    it(`ichor ${id.replaceAll(':', ' ')} --json`, async () => {
      await kase.before?.()
      const run = id === 'init' ? init : await runIchor([...id.split(':'), ...kase.args(), '--json'], {...h.env, ...kase.env?.()})
      expectContract(id, run)
    }, 600_000)
  }
})
