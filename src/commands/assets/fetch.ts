import {Flags} from '@oclif/core'
import {fetchAssets, type FetchResult} from '../../lib/assets/fetch.js'
import {ASSET_IDS, type AssetId} from '../../lib/assets/lock.js'
import {IchorCommand} from '../../lib/cli/base.js'

export default class AssetsFetch extends IchorCommand {
  static override summary = 'Download the pinned Cilium chart, Argo CD chart and Kokumi manifest and verify their SHA-256.'
  static override examples = ['<%= config.bin %> assets fetch', '<%= config.bin %> assets fetch --from ./mirror --only cilium']
  static override flags = {
    from: Flags.string({description: 'copy from a local mirror directory instead of downloading', helpValue: 'DIR'}),
    only: Flags.string({description: 'fetch only these artifacts (repeat, or a comma list)', options: [...ASSET_IDS], multiple: true, delimiter: ','}),
    'assets-dir': Flags.string({description: 'store them here instead of $XDG_CACHE_HOME/ichor/assets (or ICHOR_ASSETS_DIR)', helpValue: 'DIR'}),
  }

  async run(): Promise<{assets: FetchResult[]}> {
    const {flags} = await this.parse(AssetsFetch)
    const assets = await fetchAssets({from: flags.from, only: flags.only as AssetId[] | undefined, assetsDir: flags['assets-dir']})
    for (const a of assets) this.log(`${a.id} ${a.version}: ${a.status} ${a.path} (sha256 ${a.sha256.slice(0, 12)}, from ${a.source})`)
    return {assets}
  }
}
