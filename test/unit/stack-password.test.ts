// `ichor stack password kokumi|argocd` against a fake API server holding (or not) each Secret:
// the password alone on stdout, --json one object, an absent Secret exit 1 naming it.
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {ARGOCD_NAMESPACE, ICHOR_SYSTEM, STATE_SECRETS} from '../../src/lib/constants.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {ARGOCD_INITIAL_ADMIN_SECRET} from '../../src/lib/stack/password.js'
import {runCli} from '../support/run-cli.js'
import {sessionFixture} from '../support/session-fixture.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const secret = (namespace: string, name: string, data: Record<string, string>): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name, namespace},
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  }) as KubeObject
const env = {...process.env, XDG_STATE_HOME: join(PROJECT_ROOT, 'no-such-state-dir')}

describe('ichor stack password', () => {
  it("argocd: Argo CD's first admin password from argocd-initial-admin-secret, alone on stdout; --json one object", async () => {
    const {kubeconfig} = await sessionFixture([secret(ARGOCD_NAMESPACE, ARGOCD_INITIAL_ADMIN_SECRET, {password: 'Xq3-first-admin'})])
    const r = await runCli(['stack', 'password', 'argocd', '--kubeconfig', kubeconfig], {env})
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe('Xq3-first-admin\n')
    const json = await runCli(['stack', 'password', 'argocd', '--kubeconfig', kubeconfig, '--json'], {env})
    expect(JSON.parse(json.stdout)).toMatchObject({component: 'argocd', password: 'Xq3-first-admin'})
  })

  it('argocd: the Secret deleted after a password change is exit 1 naming it and what to do, nothing on stdout', async () => {
    const {kubeconfig} = await sessionFixture([])
    const r = await runCli(['stack', 'password', 'argocd', '--kubeconfig', kubeconfig], {env})
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).toMatch(/Secret argocd\/argocd-initial-admin-secret does not exist/)
    expect(r.stderr).toMatch(/argocd account update-password/)
  })

  it('kokumi: the password ichor generated, from ichor-system', async () => {
    const {kubeconfig} = await sessionFixture([secret(ICHOR_SYSTEM, STATE_SECRETS.kokumiAdmin, {password: 'kokumi-pass', 'signing-key': 'k'})])
    const r = await runCli(['stack', 'password', 'kokumi', '--kubeconfig', kubeconfig], {env})
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe('kokumi-pass\n')
  })

  it('another component is exit 2 naming the accepted ones', async () => {
    const r = await runCli(['stack', 'password', 'hubble'], {env})
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/kokumi, argocd/)
  })
})
