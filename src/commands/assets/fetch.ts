import {Flags} from '@oclif/core'
import {ASSET_IDS, type AssetId} from '../../lib/assets/lock.js'
import {IchorCommand} from '../../lib/cli/base.js'
import {runAssetsFetch, type AssetsFetchResult} from '../../lib/plans/assets-fetch.js'

export default class AssetsFetch extends IchorCommand {
  static override summary = 'Download the pinned Cilium chart, Argo CD chart and Kokumi manifest and verify their SHA-256.'
  static override description = `With --from DIR, a compatibility.json in DIR (the version knowledge upgrade decisions read) is taken too when its revision is newer than the one in use, after checking its schema and the sha256 it claims; commands then read it from $XDG_CACHE_HOME/ichor/assets (or ICHOR_ASSETS_DIR), so a new patch release needs no new binary.`
  static override examples = ['<%= config.bin %> assets fetch', '<%= config.bin %> assets fetch --from ./mirror --only cilium']
  static override flags = {
    from: Flags.string({description: 'copy from a local mirror directory instead of downloading', helpValue: 'DIR'}),
    only: Flags.string({description: 'fetch only these artifacts (repeat, or a comma list)', options: [...ASSET_IDS], multiple: true, delimiter: ','}),
    'assets-dir': Flags.string({description: 'store them here instead of $XDG_CACHE_HOME/ichor/assets (or ICHOR_ASSETS_DIR)', helpValue: 'DIR'}),
  }

  async run(): Promise<AssetsFetchResult> {
    const {flags} = await this.parse(AssetsFetch)
    const result = await runAssetsFetch({from: flags.from, only: flags.only as AssetId[] | undefined, assetsDir: flags['assets-dir']})
    for (const a of result.assets) this.log(`${a.id} ${a.version}: ${a.status} ${a.path} (sha256 ${a.sha256.slice(0, 12)}, from ${a.source})`)
    const c = result.compatibility
    if (c?.status === 'taken') this.log(`compatibility data revision ${c.revision}: taken from ${c.source} into ${c.path}`)
    else if (c?.status === 'not newer') this.log(`compatibility data: ${c.source} is not newer than revision ${c.revision} in use (${c.path}); kept`)
    else if (c) this.log(`compatibility data: the mirror has none; revision ${c.revision} in use (${c.path})`)
    return result
  }
}
