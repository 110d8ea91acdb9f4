// The files ichor ships, as the npm package reads them (the single binary serves the same
// paths from its SEA assets: test/e2e/single-binary.test.ts).
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {embeddedArtifactFile, embeddedAssets, isSingleBinary, readPackagedAsset} from '../../src/lib/assets/packaged.js'
import {PROJECT_ROOT} from '../support/upstream.js'

describe('packaged assets from the npm package', () => {
  it('reads lock.json, the policies and the CRD from the package assets/ folder', () => {
    for (const rel of ['lock.json', 'policies/kokumi.yaml', 'policies/argocd.yaml', 'crds/ichorinstallation.yaml']) {
      expect(readPackagedAsset(rel).equals(readFileSync(join(PROJECT_ROOT, 'assets', rel))), rel).toBe(true)
    }
    expect(() => readPackagedAsset('no-such-file.yaml')).toThrow(/ENOENT/)
  })

  it('is not the single binary: nothing embedded, so embeddedAssets() is undefined', () => {
    expect(isSingleBinary()).toBe(false)
    expect(embeddedAssets()).toBeUndefined()
    expect(embeddedArtifactFile('cilium', '/nonexistent')).toBeUndefined()
  })
})
