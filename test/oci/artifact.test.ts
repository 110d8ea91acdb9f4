import {gunzipSync} from 'node:zlib'
import {describe, expect, it, vi} from 'vitest'
import {
  ANNOTATION_SOURCE,
  ANNOTATION_VERSION,
  buildArtifact,
  FLUX_CONFIG_MEDIA_TYPE,
  FLUX_CONTENT_MEDIA_TYPE,
  OCI_MANIFEST_MEDIA_TYPE,
} from '../../src/lib/oci/artifact.js'
import {buildBundle, sha256Digest} from '../../src/lib/oci/bundle.js'
import {FIXED_FILES} from './support/bundle-input.js'

const bundle = buildBundle(FIXED_FILES)
const annotations = {source: 'https://github.com/argoproj/argo-helm', version: '10.11.6'}

describe('buildArtifact', () => {
  it('is an OCI image manifest with the Flux config and content media types and the two annotations', () => {
    const a = buildArtifact({...bundle, annotations})
    expect(a.mediaType).toBe(OCI_MANIFEST_MEDIA_TYPE)
    expect(a.config.toString()).toBe('{}')
    expect(a.configDigest).toBe(sha256Digest('{}'))
    expect(JSON.parse(a.manifest.toString())).toEqual({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {mediaType: 'application/vnd.cncf.flux.config.v1+json', digest: a.configDigest, size: 2},
      layers: [
        {
          mediaType: 'application/vnd.cncf.flux.content.v1.tar+gzip',
          digest: bundle.layerDigest,
          size: bundle.size,
          // Kokumi 0.14.0's oras file store unpacks a layer only with a title and the unpack flag.
          annotations: {
            'io.deis.oras.content.digest': sha256Digest(gunzipSync(bundle.layer)),
            'io.deis.oras.content.unpack': 'true',
            'org.opencontainers.image.title': '.',
          },
        },
      ],
      annotations: {'org.opencontainers.image.source': annotations.source, 'org.opencontainers.image.version': '10.11.6'},
    })
    expect(a.manifestDigest).toBe(sha256Digest(a.manifest))
    expect([FLUX_CONFIG_MEDIA_TYPE, FLUX_CONTENT_MEDIA_TYPE, ANNOTATION_SOURCE, ANNOTATION_VERSION]).toEqual([
      'application/vnd.cncf.flux.config.v1+json',
      'application/vnd.cncf.flux.content.v1.tar+gzip',
      'org.opencontainers.image.source',
      'org.opencontainers.image.version',
    ])
  })

  it('has no wall-clock time: the same input at another date gives the same manifest digest', () => {
    const first = buildArtifact({...bundle, annotations})
    vi.useFakeTimers({now: new Date('2031-07-04T12:00:00Z')})
    let second
    try {
      second = buildArtifact({...buildBundle(FIXED_FILES), annotations: {...annotations}})
    } finally {
      vi.useRealTimers()
    }
    expect(second.manifest.equals(first.manifest)).toBe(true)
    expect(second.manifestDigest).toBe(first.manifestDigest)
    expect(first.manifest.toString()).not.toMatch(/created|\d{4}-\d\d-\d\dT/)
  })

  it('moves the manifest digest with the layer or an annotation', () => {
    const base = buildArtifact({...bundle, annotations}).manifestDigest
    const other = buildBundle([{path: 'manifest.yaml', content: 'x'}])
    expect(buildArtifact({...other, annotations}).manifestDigest).not.toBe(base)
    expect(buildArtifact({...bundle, annotations: {...annotations, version: '10.11.7'}}).manifestDigest).not.toBe(base)
  })

  it('refuses a layer digest that does not match the layer', () => {
    expect(() => buildArtifact({layer: bundle.layer, layerDigest: sha256Digest('other'), annotations})).toThrow(/does not match/)
  })
})
