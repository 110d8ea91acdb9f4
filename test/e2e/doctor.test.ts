// `ichor doctor` with the real parts: the real talosctl v1.14.1 and helm, and a real
// kube-apiserver answering through the kubeconfig (the version-parsing cases with small
// scripts are in test/unit/doctor.test.ts).
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {runIchor} from '../harness/cluster.js'
import {realTalosctlPath} from '../harness/talosctl.js'
import {UPSTREAM} from '../support/upstream.js'

let cp: ControlPlane
let dir: string
beforeAll(async () => {
  cp = await startControlPlane()
  dir = mkdtempSync(join(tmpdir(), 'ichor-doctor-e2e-'))
})
afterAll(async () => {
  await cp?.stop()
  rmSync(dir, {recursive: true, force: true})
})

describe('ichor doctor on a real API server', () => {
  it('the real talosctl matches the targeted Talos, helm can adopt, the kubeconfig is read and the server answers: exit 0', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ICHOR_TALOSCTL: realTalosctlPath(),
      ICHOR_MIRROR: UPSTREAM.dir,
      XDG_STATE_HOME: join(dir, 'state'),
      XDG_CACHE_HOME: join(dir, 'cache'),
    }
    delete env.KUBECONFIG
    const run = await runIchor(['doctor', '--json', '--kubeconfig', cp.kubeconfigPath, '--talos-version', 'v1.14.1'], env)
    expect(run.code, run.stdout + run.stderr).toBe(0)
    const doc = JSON.parse(run.stdout) as {ok: boolean; checks: {id: string; status: string; detail: string}[]}
    const status = Object.fromEntries(doc.checks.map((c) => [c.id, c.status]))
    expect(status).toMatchObject({talosctl: 'ok', helm: 'ok', kubeconfig: 'ok', 'kube-api': 'ok', 'state-dir': 'ok', 'asset:cilium': 'ok'})
    expect(doc.checks.find((c) => c.id === 'talosctl')!.detail).toMatch(/talosctl v1\.14\.1 .* matches Talos v1\.14\.1/)
    expect(doc.checks.find((c) => c.id === 'kube-api')!.detail).toMatch(new RegExp(`${cp.server.replace(/\./g, '\\.')} answers: Kubernetes v1\\.\\d+`))
  })
})
