import {IchorCommand} from '../../lib/cli/base.js'
import {planFlags} from '../../lib/cli/flags.js'
import {runStackRepairSecretsPlan} from '../../lib/plans/stack-repair-secrets.js'

export default class StackRepairSecrets extends IchorCommand {
  static override summary = 'Set a new password on both sides of a generated Secret that no longer matches its component (Kokumi admin, Argo CD redis).'
  static override description =
    'When ichor-system/ichor-kokumi-admin or ichor-system/ichor-argocd-redis was deleted or no longer opens kokumi/kokumi-server-auth or argocd/argocd-redis, ' +
    'init and stack status stop and point here. A new password is written to both sides, the workloads that read it are restarted and waited for (within --timeout) until they and both Applications are Healthy again, and the Kokumi admin password is shown once. A no-op when both sides agree.'
  static override examples = [
    '<%= config.bin %> stack repair-secrets',
    '<%= config.bin %> stack repair-secrets --dry-run',
    '<%= config.bin %> stack repair-secrets --kubeconfig ./kubeconfig --json',
  ]
  static override flags = planFlags({timeout: 300, dryRun: 'change nothing: probe and show what would run'})

  async run() {
    const {flags} = await this.parse(StackRepairSecrets)
    const json = this.jsonEnabled()
    const result = await runStackRepairSecretsPlan(this.planOptions(flags))
    if (!json) {
      if (result.kokumiAdminPassword)
        this.log(`\nNew Kokumi admin password (shown once, kept in ichor-system/ichor-kokumi-admin): ${result.kokumiAdminPassword}`)
      this.log(
        result.repaired.length > 0
          ? `\nRepaired: ${result.repaired.join(', ')}.`
          : result.dryRun
            ? '\nDry run: the steps marked "would run" are what a real run changes.'
            : '\nNothing to do: every generated Secret matches its component.',
      )
    }
    return result
  }
}
