// The release record Helm stores in a Secret (`sh.helm.release.v1.<release>.v<N>`), read
// straight from the API without a helm process, and the values hash a rerun compares.
import {createHash} from 'node:crypto'
import {gunzipSync} from 'node:zlib'
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'

/** The subset of Helm's release JSON (`-o json`, and the stored record) that ichor reads. */
export interface HelmReleaseJson {
  name?: string
  namespace?: string
  version?: number
  info?: {status?: string}
  chart?: {metadata?: {name?: string; version?: string}; values?: Record<string, unknown> | null}
  config?: Record<string, unknown> | null
  manifest?: string
  hooks?: Array<{events?: string[]}> | null
}

export interface ReleaseRecord {
  /** Name of the Secret it was read from (`sh.helm.release.v1.cilium.v3`). */
  secretName: string
  release: string
  namespace: string
  revision: number
  status: string
  chartName: string
  chartVersion: string
  /** The user-supplied values of this revision (what `--values` gave), `{}` when none. */
  config: Record<string, unknown>
  /** The rendered manifest Helm applied. */
  manifest: string
  /** The chart's own default values (its values.yaml), as the record stores them. */
  chartValues?: Record<string, unknown>
  /** The labels of its Secret: helm's own (status, version, ...) and those given with --labels. */
  labels?: Record<string, string>
  /** When its Secret was created, on the API server's clock (ms since the epoch; NaN when unknown). */
  createdAt?: number
  /** The events of each of its hooks (pre-upgrade, post-upgrade, ...), one list per hook. */
  hookEvents?: string[][]
}

/** The parts of a Secret the release record is read from. */
export interface ReleaseSecret {
  type?: string
  metadata?: {name?: string; namespace?: string; labels?: Record<string, string>; creationTimestamp?: string}
  data?: Record<string, string>
}

/**
 * Reads the newest `sh.helm.release.v1.<release>.v<N>` Secret straight from the API (no
 * helm process): it is how a rerun learns which values are applied without shelling out.
 * Undefined when the release has no record.
 */
export async function readReleaseRecord(kube: Kube, release: string, namespace: string): Promise<ReleaseRecord | undefined> {
  const {items} = await kube.request<{items: ReleaseSecret[]}>('GET', `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
    query: {labelSelector: `owner=helm,name=${release}`},
  })
  const records = items
    .filter((s) => s.type === 'helm.sh/release.v1' && s.metadata?.name?.startsWith(`sh.helm.release.v1.${release}.v`))
    .map((s) => ({secret: s, revision: Number(s.metadata?.labels?.version ?? s.metadata!.name!.split('.v').pop())}))
    .filter((r) => Number.isInteger(r.revision))
    .sort((a, b) => b.revision - a.revision)
  const newest = records[0]
  return newest ? decodeReleaseSecret(newest.secret) : undefined
}

/** The release record's JSON text, as Helm's Secret driver stored it (see decodeReleaseSecret). */
export function releaseRecordJson(secret: ReleaseSecret): string {
  const field = secret.data?.release
  if (!field) throw new IchorError(`Helm release Secret ${secret.metadata?.name ?? '(unnamed)'} has no data.release`)
  const helmPayload = Buffer.from(Buffer.from(field, 'base64').toString('utf8'), 'base64')
  // Helm gzips the record; it also reads uncompressed JSON, so do we.
  return helmPayload[0] === 0x1f && helmPayload[1] === 0x8b ? gunzipSync(helmPayload).toString('utf8') : helmPayload.toString('utf8')
}

/**
 * Helm's Secret driver stores `data.release` = base64(gzip(JSON)); the API then base64s
 * that again as Secret data, so the field read through the API is base64 of base64.
 */
export function decodeReleaseSecret(secret: ReleaseSecret): ReleaseRecord {
  const name = secret.metadata?.name ?? '(unnamed)'
  const json = releaseRecordJson(secret)
  let rel: HelmReleaseJson
  try {
    rel = JSON.parse(json) as HelmReleaseJson
  } catch (error) {
    throw new IchorError(`Helm release Secret ${name} does not hold a readable release record`, {cause: error})
  }
  return {
    secretName: name,
    release: rel.name ?? '',
    namespace: rel.namespace ?? secret.metadata?.namespace ?? '',
    revision: rel.version ?? 0,
    status: rel.info?.status ?? 'unknown',
    chartName: rel.chart?.metadata?.name ?? '',
    chartVersion: rel.chart?.metadata?.version ?? '',
    config: rel.config ?? {},
    manifest: rel.manifest ?? '',
    chartValues: rel.chart?.values ?? undefined,
    labels: secret.metadata?.labels ?? {},
    createdAt: Date.parse(secret.metadata?.creationTimestamp ?? ''),
    hookEvents: (rel.hooks ?? []).map((h) => h.events ?? []),
  }
}

/**
 * sha256 (hex) of the values as canonical JSON: object keys sorted at every depth, arrays
 * in order, undefined dropped as JSON does. Equal values hash equal whatever their key
 * order, so a rerun can tell the release already runs these values and skip the upgrade.
 */
export function valuesHash(values: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(values ?? {}))
    .digest('hex')
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null'
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key]
      if (v !== undefined) out[key] = sortKeys(v)
    }
    return out
  }
  return value
}
