import {Args, Flags} from '@oclif/core'
import {IchorCommand} from '../lib/cli/base.js'
import {kubeFlags, outputFormatFlag, timeoutFlag} from '../lib/cli/flags.js'
import {printResult} from '../lib/cli/output.js'
import {formatOpen, parseListenAddress, parseListenPort, runOpen, type OpenResult} from '../lib/open/open.js'
import {OPEN_COMPONENTS, OPEN_TARGETS, type OpenComponent} from '../lib/open/targets.js'
import {interruptEndsNormally} from '../lib/session/interrupt.js'

export default class Open extends IchorCommand {
  static override summary = 'Open a stack UI (Argo CD, Kokumi, Hubble) on a local port through the API server, until Ctrl-C.'
  static override description = `As kubectl port-forward svc/NAME does: the Service's selector picks a running, ready pod, and each local connection is tunnelled to that pod's port through the API server. Prints the URL and the login (the user, and the command that prints the password: never the password itself), then serves until Ctrl-C, which exits 0.
Default local ports: argocd ${OPEN_TARGETS.argocd.defaultPort}, kokumi ${OPEN_TARGETS.kokumi.defaultPort}, hubble ${OPEN_TARGETS.hubble.defaultPort} (as cilium hubble ui); --port 0 picks a free one. Listens on 127.0.0.1 only unless --address says otherwise.
The Hubble UI is there only when Cilium's values enable it (hubble.ui.enabled and hubble.relay.enabled; ichor cni values set sets them); without it, exit 1 saying so. Read-only: no Lease.`
  static override examples = ['<%= config.bin %> open argocd', '<%= config.bin %> open kokumi --port 9000', '<%= config.bin %> open hubble --port 0 -o json']
  static override args = {
    component: Args.string({description: 'the UI to open', options: [...OPEN_COMPONENTS], required: true}),
  }
  static override flags = {
    ...kubeFlags,
    port: Flags.custom<number>({
      description: 'local port to listen on; 0 picks a free one (default: argocd 8080, kokumi 8081, hubble 12000)',
      helpValue: 'PORT',
      parse: async (input) => parseListenPort(input),
    })(),
    address: Flags.string({
      description: 'local address to listen on, as kubectl port-forward --address (an IP address, or localhost)',
      helpValue: 'ADDRESS',
      default: '127.0.0.1',
      parse: async (input) => parseListenAddress(input),
    }),
    timeout: timeoutFlag(60, 'how long to wait for a running, ready pod behind the Service'),
    ...outputFormatFlag,
  }

  async run(): Promise<OpenResult> {
    const {args, flags} = await this.parse(Open)
    const json = this.jsonEnabled()
    // Ctrl-C is how it ends: exit 0, as the issue and kubectl port-forward do.
    interruptEndsNormally()
    return runOpen({
      component: args.component as OpenComponent,
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      port: flags.port,
      address: flags.address,
      timeoutMs: flags.timeout,
      // The result is printed before serving, as one document: a script reads the URL from it.
      onReady: async (result) => {
        // --json too: the process never returns a result for oclif to print, so it is printed here.
        if (json) await printResult(this.toSuccessJson(result), {format: 'json', json: false, human: () => ''})
        else await printResult(result, {format: flags.output, json, human: formatOpen})
        this.note('Serving until Ctrl-C.')
      },
    })
  }
}
