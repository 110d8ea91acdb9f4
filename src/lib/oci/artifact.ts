// The OCI artifact around one bundle layer, in the shape Flux's `push artifact` gives it and
// Kokumi accepts as a pre-rendered manifest bundle (ADR decision 7). Nothing here reads the
// clock: the same layer and annotations give the same manifest bytes and digest.
import {IchorError} from '../errors/errors.js'
import {sha256Digest} from './bundle.js'

export const OCI_MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json'
export const FLUX_CONFIG_MEDIA_TYPE = 'application/vnd.cncf.flux.config.v1+json'
export const FLUX_CONTENT_MEDIA_TYPE = 'application/vnd.cncf.flux.content.v1.tar+gzip'
export const ANNOTATION_SOURCE = 'org.opencontainers.image.source'
export const ANNOTATION_VERSION = 'org.opencontainers.image.version'

export interface ArtifactInput {
  layer: Buffer
  layerDigest: string
  annotations: {source: string; version: string}
}

export interface Artifact {
  config: Buffer
  configDigest: string
  manifest: Buffer
  manifestDigest: string
  mediaType: typeof OCI_MANIFEST_MEDIA_TYPE
}

export function buildArtifact({layer, layerDigest, annotations}: ArtifactInput): Artifact {
  // A wrong digest here would only surface as a registry error after the upload; fail before.
  if (sha256Digest(layer) !== layerDigest) {
    throw new IchorError(`artifact: the layer digest ${layerDigest} does not match the layer bytes (${sha256Digest(layer)})`)
  }
  const config = Buffer.from('{}')
  const configDigest = sha256Digest(config)
  // Key order is fixed by this literal, so JSON.stringify is canonical enough for a stable digest.
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST_MEDIA_TYPE,
      config: {mediaType: FLUX_CONFIG_MEDIA_TYPE, digest: configDigest, size: config.length},
      layers: [{mediaType: FLUX_CONTENT_MEDIA_TYPE, digest: layerDigest, size: layer.length}],
      annotations: {[ANNOTATION_SOURCE]: annotations.source, [ANNOTATION_VERSION]: annotations.version},
    }),
  )
  return {config, configDigest, manifest, manifestDigest: sha256Digest(manifest), mediaType: OCI_MANIFEST_MEDIA_TYPE}
}
