import {IchorCommand} from '../lib/cli/base.js'
import {formatVersionInfo, versionInfo, type VersionInfo} from '../lib/cli/version-info.js'

export default class Version extends IchorCommand {
  static override summary = 'Print the ichor version and the Cilium, Argo CD, Kokumi, Talos and Kubernetes versions it pins.'
  static override examples = ['<%= config.bin %> version', '<%= config.bin %> --version', '<%= config.bin %> version --json']

  async run(): Promise<VersionInfo> {
    await this.parse(Version)
    const info = versionInfo(this.config)
    this.log(formatVersionInfo(info))
    return info
  }
}
