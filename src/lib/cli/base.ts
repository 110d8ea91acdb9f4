// Shared behaviour of every command: user errors print without a stack trace and
// exit non-zero; --json prints the command's typed result as one JSON document.
import {Command, Flags} from '@oclif/core'
import {isIchorError, ValidationError} from '../errors/errors.js'

export abstract class IchorCommand extends Command {
  static override enableJsonFlag = true

  protected override async catch(err: Error & {exitCode?: number}): Promise<unknown> {
    if (isIchorError(err)) {
      if (this.jsonEnabled()) {
        this.logJson({
          error: {
            message: err.message.split('\n')[0],
            issues: err instanceof ValidationError ? err.issues : undefined,
            hint: err.hint,
          },
        })
      } else {
        process.stderr.write(`Error: ${err.message}\n`)
        if (err.hint) process.stderr.write(`Hint: ${err.hint}\n`)
      }
      this.exit(err.exitCode)
    }
    return super.catch(err)
  }

  /** Progress and notes go to stderr so stdout stays clean for --json and pipes. */
  protected note(line: string): void {
    if (!this.jsonEnabled()) process.stderr.write(`${line}\n`)
  }
}

/** Flags that point at the upstream artifacts; every command that renders takes them. */
export const assetFlags = {
  'cilium-chart': Flags.string({description: 'Cilium chart .tgz to use instead of the pinned, fetched one', helpValue: 'FILE'}),
  'argocd-chart': Flags.string({description: 'Argo CD chart .tgz to use instead of the pinned, fetched one', helpValue: 'FILE'}),
  'kokumi-manifest': Flags.string({description: "Kokumi install.yaml to use instead of the pinned, fetched one", helpValue: 'FILE'}),
  mirror: Flags.string({description: 'local mirror directory to take artifacts from when none was fetched (also ICHOR_MIRROR)', helpValue: 'DIR'}),
  'assets-dir': Flags.string({description: 'where `ichor assets fetch` put the artifacts (also ICHOR_ASSETS_DIR; default $XDG_CACHE_HOME/ichor/assets)', helpValue: 'DIR'}),
}
