// The bundle layout against Kokumi's pullers as the stack simulator reproduces them from
// kokumi-dev/kokumi (0.14.0 and later main, test/harness/kokumi-puller.ts): ichor's bundle must
// leave manifest.yaml in Kokumi's work folder with either; the bare Flux layer ichor published
// before did not with 0.14.0.
import {describe, expect, it} from 'vitest'
import {buildArtifact, FLUX_CONFIG_MEDIA_TYPE, FLUX_CONTENT_MEDIA_TYPE} from '../../src/lib/oci/artifact.js'
import {buildBundle, sha256Digest} from '../../src/lib/oci/bundle.js'
import {pullerFor, pullManifest, type PulledManifest} from '../harness/kokumi-puller.js'

const manifestYaml = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n'
const bundle = buildBundle([{path: 'manifest.yaml', content: manifestYaml}])
const artifact = buildArtifact({...bundle, annotations: {source: 'oci://r/ichor/argocd', version: '1.0.0-aaaaaaaaaaaa'}})
const blobs = new Map([
  [bundle.layerDigest, bundle.layer],
  [artifact.configDigest, artifact.config],
])
const blob = async (d: string) => blobs.get(d)!

describe("Kokumi's pullers (simulated from source) read ichor's bundle", () => {
  it('picks the 0.14.0 puller for 0.14.x and main’s for anything newer (the 0.17 fixture)', () => {
    expect(pullerFor('0.14.0')).toBe('kokumi-0.14.0')
    expect(pullerFor('v0.14.2')).toBe('kokumi-0.14.0')
    expect(pullerFor('0.17.0')).toBe('kokumi-main')
  })

  it.each(['kokumi-0.14.0', 'kokumi-main'] as const)('%s finds manifest.yaml in the published artifact', async (puller) => {
    const manifest = JSON.parse(artifact.manifest.toString()) as PulledManifest
    expect(await pullManifest(puller, manifest, blob)).toEqual({manifest: manifestYaml})
  })

  it('a bare Flux layer (no oras title/unpack annotations) is read by main but not by 0.14.0', async () => {
    const bare: PulledManifest = {
      config: {mediaType: FLUX_CONFIG_MEDIA_TYPE, digest: artifact.configDigest},
      layers: [{mediaType: FLUX_CONTENT_MEDIA_TYPE, digest: bundle.layerDigest}],
    }
    expect(await pullManifest('kokumi-main', bare, blob)).toEqual({manifest: manifestYaml})
    expect(await pullManifest('kokumi-0.14.0', bare, blob)).toEqual({error: expect.stringMatching(/failed to read manifest/)})
  })

  it('0.14.0 checks the uncompressed digest annotation as oras does', async () => {
    const manifest = JSON.parse(artifact.manifest.toString()) as PulledManifest
    manifest.layers[0]!.annotations!['io.deis.oras.content.digest'] = sha256Digest('other')
    expect(await pullManifest('kokumi-0.14.0', manifest, blob)).toEqual({error: expect.stringMatching(/digest mismatch/)})
  })
})
