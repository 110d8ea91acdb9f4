// Publishes one bundle as an OCI artifact, idempotently: a rerun with the same rendered
// manifests finds the tag at the same digest and uploads nothing (DESIGN.md flow step 7).
import {buildArtifact} from './artifact.js'
import type {OciClient} from './client.js'

export interface PublishInput {
  /** Repository inside the registry, e.g. `ichor/argocd`. */
  repository: string
  tag: string
  layer: Buffer
  layerDigest: string
  annotations: {source: string; version: string}
  /** Upload blobs in PATCH chunks of this size instead of one PUT. */
  chunkSize?: number
}

export interface PublishResult {
  repository: string
  tag: string
  layerDigest: string
  manifestDigest: string
  /** False when the registry already held the tag at this manifest digest. */
  pushed: boolean
  /** Blobs actually uploaded (0-2: config and layer); those already present are skipped. */
  uploadedBlobs: number
}

export async function publishBundle(client: OciClient, input: PublishInput): Promise<PublishResult> {
  const {repository, tag, layer, layerDigest, annotations, chunkSize} = input
  const artifact = buildArtifact({layer, layerDigest, annotations})
  const base = {repository, tag, layerDigest, manifestDigest: artifact.manifestDigest}

  const current = await client.headManifest(repository, tag)
  if (current?.digest === artifact.manifestDigest) return {...base, pushed: false, uploadedBlobs: 0}

  let uploadedBlobs = 0
  // Blobs before the manifest: a registry refuses a manifest whose blobs it lacks.
  for (const [bytes, digest] of [
    [artifact.config, artifact.configDigest],
    [layer, layerDigest],
  ] as const) {
    const {uploaded} = await client.pushBlob(repository, bytes, digest, {chunkSize})
    if (uploaded) uploadedBlobs++
  }
  // putManifest checks the registry's digest against the bytes we sent.
  await client.putManifest(repository, tag, artifact.manifest, artifact.mediaType)
  return {...base, pushed: true, uploadedBlobs}
}
