// `ichor assets fetch`: the pinned artifacts, verified by digest, and with --from DIR the mirror's
// compatibility data when it is a newer revision than the one in use.
import {fetchAssets, type FetchOptions, type FetchResult} from '../assets/fetch.js'
import {assetsDir} from '../assets/lock.js'
import {takeCompatibilityFrom, type CompatibilityFetch} from '../compatibility/data.js'

export interface AssetsFetchResult {
  assets: FetchResult[]
  /** Only with --from: what became of the mirror's compatibility.json. */
  compatibility?: CompatibilityFetch
}

export async function runAssetsFetch(opts: FetchOptions): Promise<AssetsFetchResult> {
  // The data is checked first: a mirror with a bad file stores nothing at all.
  const compatibility = opts.from ? await takeCompatibilityFrom(opts.from, assetsDir(opts.assetsDir)) : undefined
  return {assets: await fetchAssets(opts), ...(compatibility ? {compatibility} : {})}
}
