import {Flags} from '@oclif/core'
import {assetFlags, IchorCommand} from '../lib/cli/base.js'
import {kubeFlags} from '../lib/cli/flags.js'
import {runDoctor} from '../lib/doctor/doctor.js'
import {formatDoctorReport} from '../lib/doctor/format.js'
import type {DoctorReport} from '../lib/doctor/types.js'
import {EXIT} from '../lib/errors/exit-codes.js'
import {DEFAULT_TALOS_VERSION} from '../lib/talos/versions.js'

export default class Doctor extends IchorCommand {
  static override summary = 'Check this machine: talosctl, helm, the kubeconfig, the pinned artifacts and the state folder.'
  static override description =
    'Each check says ok, warn or fail, with the one line that fixes it. Exit code 1 when a check failed. The cluster is checked only when --kubeconfig, --context or KUBECONFIG names one.'
  static override examples = [
    '<%= config.bin %> doctor',
    '<%= config.bin %> doctor --talos-version v1.13.4 --kubeconfig ~/.local/state/ichor/homelab/kubeconfig',
    '<%= config.bin %> doctor --json',
  ]
  static override flags = {
    'talos-version': Flags.string({
      description: 'the Talos version you target; talosctl is compared with it',
      helpValue: 'VERSION',
      default: DEFAULT_TALOS_VERSION,
    }),
    ...kubeFlags,
    'state-dir': Flags.string({description: "init's local state folder to check (default: $XDG_STATE_HOME/ichor)", helpValue: 'DIR'}),
    ...assetFlags,
  }

  async run(): Promise<DoctorReport> {
    const {flags} = await this.parse(Doctor)
    const report = await runDoctor({
      talosVersion: flags['talos-version'],
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      stateDir: flags['state-dir'],
      assets: {
        cilium: flags['cilium-chart'],
        argocd: flags['argocd-chart'],
        kokumi: flags['kokumi-manifest'],
        mirror: flags.mirror,
        assetsDir: flags['assets-dir'],
      },
    })
    this.log(formatDoctorReport(report))
    if (!report.ok) process.exitCode = EXIT.failed
    return report
  }
}
