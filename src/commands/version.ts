import {IchorCommand} from '../lib/cli/base.js'
import {outputFormatFlag} from '../lib/cli/flags.js'
import {printResult} from '../lib/cli/output.js'
import {formatVersionInfo, versionInfo, type VersionInfo} from '../lib/cli/version-info.js'

export default class Version extends IchorCommand {
  static override summary = 'Print the ichor version and the Cilium, Argo CD, Kokumi, Talos and Kubernetes versions it pins.'
  static override examples = ['<%= config.bin %> version', '<%= config.bin %> --version', '<%= config.bin %> version -o json']
  static override flags = {...outputFormatFlag}

  async run(): Promise<VersionInfo> {
    const {flags} = await this.parse(Version)
    const info = versionInfo(this.config)
    await printResult(info, {format: flags.output, json: this.jsonEnabled(), human: formatVersionInfo})
    return info
  }
}
