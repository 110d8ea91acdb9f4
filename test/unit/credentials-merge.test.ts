// How ichor's credentials join an operator's kubeconfig and talosconfig: everything else kept,
// the new context current, a clash refused unless --force, the same entry no change.
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parse, stringify} from 'yaml'
import {describe, expect, it} from 'vitest'
import {mergeKubeconfig, mergeTalosconfig, planCredentialWrite, renameKubeconfig, type KubeconfigFile} from '../../src/lib/credentials/merge.js'

const talosMade = (cluster: string, token: string): KubeconfigFile => ({
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [{name: cluster, cluster: {server: 'https://192.0.2.10:6443'}}],
  users: [{name: `admin@${cluster}`, user: {token}}],
  contexts: [{name: `admin@${cluster}`, context: {cluster, namespace: 'default', user: `admin@${cluster}`}}],
  'current-context': `admin@${cluster}`,
})
const work: KubeconfigFile = {
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [{name: 'work', cluster: {server: 'https://198.51.100.1:6443'}}],
  users: [{name: 'me', user: {token: 'w'}}],
  contexts: [{name: 'work', context: {cluster: 'work', user: 'me'}}],
  'current-context': 'work',
  preferences: {colors: true},
}
const o = {force: false, path: '~/.kube/config'}

describe('mergeKubeconfig', () => {
  it("adds the cluster, user and context beside the others, keeps the file's other keys, makes it current", () => {
    const {doc, changed} = mergeKubeconfig(work, talosMade('homelab', 't1'), o)
    expect(changed).toBe(true)
    expect(doc.contexts!.map((c) => c.name)).toEqual(['work', 'admin@homelab'])
    expect(doc.clusters!.map((c) => c.name)).toEqual(['work', 'homelab'])
    expect(doc['current-context']).toBe('admin@homelab')
    expect(doc.preferences).toEqual({colors: true})
  })

  it('the same entries again: no change', () => {
    const once = mergeKubeconfig(work, talosMade('homelab', 't1'), o).doc
    expect(mergeKubeconfig(once, talosMade('homelab', 't1'), o).changed).toBe(false)
  })

  it('a different entry of the same name: refused (exit 2) naming each, replaced with force', () => {
    const once = mergeKubeconfig(work, talosMade('homelab', 't1'), o).doc
    let error: {message: string; exitCode: number; hint?: string} | undefined
    try {
      mergeKubeconfig(once, talosMade('homelab', 't2'), o)
    } catch (e) {
      error = e as typeof error
    }
    expect(error?.message).toBe('~/.kube/config already has a different user "admin@homelab": ichor does not overwrite it')
    expect(error?.exitCode).toBe(2)
    expect(error?.hint).toMatch(/--context-name NAME.*--force/)
    const forced = mergeKubeconfig(once, talosMade('homelab', 't2'), {...o, force: true}).doc
    expect(forced.users!.find((u) => u.name === 'admin@homelab')?.user).toEqual({token: 't2'})
    expect(forced.users).toHaveLength(2)
  })

  it('--context-name renames the context, its cluster and its user together', () => {
    const renamed = renameKubeconfig(talosMade('homelab', 't'), 'lab')
    expect(renamed.contexts).toEqual([{name: 'lab', context: {cluster: 'lab', namespace: 'default', user: 'lab'}}])
    expect(renamed.clusters!.map((c) => c.name)).toEqual(['lab'])
    expect(renamed.users!.map((u) => u.name)).toEqual(['lab'])
    expect(renamed['current-context']).toBe('lab')
  })
})

describe('mergeTalosconfig (talosctl config merge, without its renames)', () => {
  const ctx = (endpoint: string) => ({endpoints: [endpoint], nodes: [endpoint], ca: 'c', crt: 'r', key: 'k'})
  it('keeps other contexts, sets the current one; a different one of the same name is refused unless forced', () => {
    const mine = {context: 'work', contexts: {work: ctx('198.51.100.1')}}
    const {doc} = mergeTalosconfig(mine, {context: 'homelab', contexts: {homelab: ctx('192.0.2.10')}}, o)
    expect(Object.keys(doc.contexts!)).toEqual(['work', 'homelab'])
    expect(doc.context).toBe('homelab')
    expect(mergeTalosconfig(doc, {context: 'homelab', contexts: {homelab: ctx('192.0.2.10')}}, o).changed).toBe(false)
    expect(() => mergeTalosconfig(doc, {context: 'homelab', contexts: {homelab: ctx('192.0.2.99')}}, o)).toThrow(/already has a different context "homelab"/)
  })
})

describe('planCredentialWrite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-cred-'))
  it('a file of its own: an existing one only with --force or --merge; a file that is not YAML is refused naming it', () => {
    const path = join(dir, 'k')
    const text = stringify(talosMade('homelab', 't'))
    expect(planCredentialWrite('kubeconfig', text, {output: path, merge: false, force: false}, mergeKubeconfig)).toMatchObject({
      path,
      merged: false,
      changed: true,
    })
    writeFileSync(path, stringify(work))
    expect(() => planCredentialWrite('kubeconfig', text, {output: path, merge: false, force: false}, mergeKubeconfig)).toThrow(/PATH: .* already exists/)
    const merged = planCredentialWrite('kubeconfig', text, {output: path, merge: true, force: false}, mergeKubeconfig)
    expect((parse(merged.content) as KubeconfigFile).contexts!.map((c) => c.name)).toEqual(['work', 'admin@homelab'])
    writeFileSync(path, '{not: [yaml')
    expect(() => planCredentialWrite('kubeconfig', text, {output: path, merge: true, force: false}, mergeKubeconfig)).toThrow(
      /is not a kubeconfig ichor can read/,
    )
    expect(readFileSync(path, 'utf8')).toBe('{not: [yaml')
  })
})
