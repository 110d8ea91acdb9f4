import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags, outputFormatFlag, registryEndpointFlag} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {renderStackStatus, stackStatus} from '../../lib/stack/status.js'

export default class StackStatus extends IchorCommand {
  static override summary = 'Show per component the published bundle, the registry, the Kokumi Order and the Argo CD Application; exit 1 when degraded.'
  static override examples = [
    '<%= config.bin %> stack status',
    '<%= config.bin %> stack status -o json --kubeconfig ./kubeconfig',
    '<%= config.bin %> stack status -o yaml --registry-endpoint http://127.0.0.1:5000',
  ]
  static override flags = {...kubeFlags, ...outputFormatFlag, ...registryEndpointFlag}

  async run() {
    const {flags} = await this.parse(StackStatus)
    const status = await stackStatus({kubeconfig: flags.kubeconfig, context: flags.context, registryEndpoint: flags['registry-endpoint']})
    // Scripts gate on it: 0 healthy, 1 degraded.
    await printResult(status, {format: flags.output, json: this.jsonEnabled(), human: renderStackStatus, failed: (s) => !s.healthy})
    return status
  }
}
