// The OCI artifact around one bundle layer, in the shape Flux's `push artifact` gives it and
// Kokumi accepts as a pre-rendered manifest bundle (ADR decision 7). Nothing here reads the
// clock: the same layer and annotations give the same manifest bytes and digest.
//
// Which layouts Kokumi's puller reads (kokumi-dev/kokumi internal/oci/oras_client.go, Pull):
// - 0.14.0: a first layer that is not a Helm chart goes through oras.Copy into an oras file
//   store (oras-go v2.6.2 content/file). That store writes only layers with an
//   `org.opencontainers.image.title`; one also annotated `io.deis.oras.content.unpack: "true"`
//   is a tar+gzip extracted under that title, so the title "." unpacks into Kokumi's work
//   folder (the same annotations Kokumi's own Push gives a Preparation). An untitled Flux
//   layer lands in memory only, and the Order fails with no manifest.yaml.
// - later main: a first layer of the Flux content media type is extracted explicitly,
//   every layer, annotations ignored.
// So the one Flux layer carries the three oras annotations: both versions find manifest.yaml,
// and Flux, which selects layers by media type, reads the same artifact unchanged.
import {gunzipSync} from 'node:zlib'
import {IchorError} from '../errors/errors.js'
import {sha256Digest} from './bundle.js'

export const OCI_MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json'
export const FLUX_CONFIG_MEDIA_TYPE = 'application/vnd.cncf.flux.config.v1+json'
export const FLUX_CONTENT_MEDIA_TYPE = 'application/vnd.cncf.flux.content.v1.tar+gzip'
export const ANNOTATION_SOURCE = 'org.opencontainers.image.source'
export const ANNOTATION_VERSION = 'org.opencontainers.image.version'
const ANNOTATION_TITLE = 'org.opencontainers.image.title'
/** oras file store: extract this tar+gzip layer under its title (oras-go content/file AnnotationUnpack). */
const ORAS_ANNOTATION_UNPACK = 'io.deis.oras.content.unpack'
/** oras file store: digest of the uncompressed tar, verified while extracting (AnnotationDigest). */
const ORAS_ANNOTATION_DIGEST = 'io.deis.oras.content.digest'

/** The layer annotations that make an oras file store unpack the bundle into its work folder. */
export function unpackAnnotations(layer: Buffer): Record<string, string> {
  return {[ORAS_ANNOTATION_DIGEST]: sha256Digest(gunzipSync(layer)), [ORAS_ANNOTATION_UNPACK]: 'true', [ANNOTATION_TITLE]: '.'}
}

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
      layers: [{mediaType: FLUX_CONTENT_MEDIA_TYPE, digest: layerDigest, size: layer.length, annotations: unpackAnnotations(layer)}],
      annotations: {[ANNOTATION_SOURCE]: annotations.source, [ANNOTATION_VERSION]: annotations.version},
    }),
  )
  return {config, configDigest, manifest, manifestDigest: sha256Digest(manifest), mediaType: OCI_MANIFEST_MEDIA_TYPE}
}
