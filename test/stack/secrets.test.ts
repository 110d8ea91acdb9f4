import {describe, expect, it} from 'vitest'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {splitSecrets} from '../../src/lib/stack/secrets.js'

describe('splitSecrets', () => {
  const objects: KubeObject[] = [
    {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'c', namespace: 'n'}},
    {apiVersion: 'v1', kind: 'Secret', metadata: {name: 's', namespace: 'n', annotations: {keep: 'me'}}, stringData: {k: 'v'}},
    {apiVersion: 'v1', kind: 'Secret', metadata: {name: 't', namespace: 'n'}},
  ]

  it('takes every Secret out and annotates it so Argo CD never prunes it nor reports it', () => {
    const {secrets, rest} = splitSecrets(objects)
    expect(rest.map((o) => o.kind)).toEqual(['ConfigMap'])
    expect(secrets.map((s) => s.metadata.name)).toEqual(['s', 't'])
    for (const s of secrets) {
      expect(s.metadata.annotations).toMatchObject({'argocd.argoproj.io/sync-options': 'Prune=false', 'argocd.argoproj.io/compare-options': 'IgnoreExtraneous'})
    }
    expect(secrets[0]!.metadata.annotations!.keep).toBe('me')
  })

  it('does not change its input', () => {
    splitSecrets(objects)
    expect(objects[1]!.metadata.annotations).toEqual({keep: 'me'})
  })
})
