// Shared behaviour of every command: --json prints the command's typed result as one JSON
// document with a schemaVersion; errors print one message (or one JSON object) with an
// exit code from the EXIT table and never a stack trace unless --debug; -v/--verbose sets
// the shared logger; SIGINT/SIGTERM run the registered cleanups and exit 130.
import {Command, Flags, type Interfaces} from '@oclif/core'
import {configureLog} from '../log/log.js'
import {configureRequests} from '../kube/request-settings.js'
import {errorJson, errorText, reportOf, SCHEMA_VERSION} from './error-report.js'
import {lockFlags, registryEndpointFlag, talosAccessFlags, timeoutFlag, verbosityFlags} from './flags.js'
import {valuesChangeFlags} from './values-args.js'
import {planOptions, type PlanFlags} from './bind.js'
import {SILENT, type Reporter} from '../log/reporter.js'
import {installInterruptHandlers} from '../session/interrupt.js'

/** oclif's FlagOutput and ArgOutput, which its index does not export. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Output = {[name: string]: any}

export abstract class IchorCommand extends Command {
  static override enableJsonFlag = true
  static override baseFlags = {...verbosityFlags}

  override async init(): Promise<void> {
    await super.init()
    const json = this.jsonEnabled()
    // The flags are parsed later by each command; the logger only needs to know whether they are there.
    const verbose = this.hasFlag('--verbose', '-v') || this.hasFlag('--debug')
    configureLog({level: verbose ? 'verbose' : 'quiet', json})
    // Under --json stderr carries JSON events only, so no "connecting to …" text there.
    configureRequests({announce: json ? 'off' : verbose ? 'now' : process.stderr.isTTY ? 'terminal' : 'off'})
    installInterruptHandlers({
      report: (signal) => {
        const report = {message: `interrupted (${signal})`, exitCode: 130, code: 'interrupted' as const}
        if (json) process.stdout.write(`${JSON.stringify(errorJson(report))}\n`)
        else process.stderr.write(`\n${errorText(report)}`)
      },
    })
  }

  /** Every command parses its flags here: a --request-timeout among them goes to the kube and registry clients. */
  protected override async parse<F extends Output, B extends Output, A extends Output>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    // oclif spreads the class into its parser options, which keeps a class's own statics only: a
    // base command's `strict` (ValuesCommand) would be dropped. Every parser input is read through the chain.
    const input = options ?? (this.ctor as unknown as Interfaces.Input<F, B, A>)
    const {flags, baseFlags, constraints, enableJsonFlag, args, strict, context} = input
    const parsed = await super.parse({flags, baseFlags, constraints, enableJsonFlag, args, strict, context, '--': input['--']}, argv)
    const timeoutMs = (parsed.flags as {'request-timeout'?: unknown})['request-timeout']
    if (typeof timeoutMs === 'number') configureRequests({timeoutMs})
    return parsed
  }

  protected override async catch(err: Error & {exitCode?: number}): Promise<unknown> {
    const report = reportOf(err, {knownFlags: this.knownFlags()})
    if (this.jsonEnabled()) {
      process.stdout.write(`${JSON.stringify(errorJson(report), null, 2)}\n`)
    } else {
      // A failed step was already shown with its reason by the task renderer: only the hint is new.
      // A dry run probes on after a failure, so its failure is said again as the last word.
      const shown = err?.name === 'TaskFailedError' && !(err as {result?: {dryRun?: boolean}}).result?.dryRun
      process.stderr.write(errorText(report, {debug: this.hasFlag('--debug'), skipMessage: shown}))
    }
    this.exit(report.exitCode)
  }

  protected override toSuccessJson(result: unknown): unknown {
    return result !== null && typeof result === 'object' && !Array.isArray(result)
      ? {schemaVersion: SCHEMA_VERSION, ...result}
      : {schemaVersion: SCHEMA_VERSION, result}
  }

  /** The options every plan takes, from the shared flags this command has (bind.ts). */
  protected planOptions(flags: PlanFlags): ReturnType<typeof planOptions> & {report: Reporter} {
    return {...planOptions(flags, this.jsonEnabled()), report: this.reporter()}
  }

  /** What lib prints through: notes and warnings on stderr, what is shown on stdout; nothing under --json. */
  protected reporter(): Reporter {
    if (this.jsonEnabled()) return SILENT
    return {note: (line) => this.note(line), warn: (line) => this.warn(line), show: (text) => this.log(text)}
  }

  /** Accepted but unwise (a short passphrase, an untested pair): on stderr; with --json they are in the result. */
  protected warnAll(warnings: readonly string[]): void {
    if (!this.jsonEnabled()) for (const w of warnings) this.warn(w)
  }

  /** Progress and notes go to stderr so stdout stays clean for --json and pipes. */
  protected note(line: string): void {
    if (!this.jsonEnabled()) process.stderr.write(`${line}\n`)
  }

  private hasFlag(...names: string[]): boolean {
    const end = this.argv.indexOf('--')
    return this.argv.some((arg, i) => (end === -1 || i < end) && names.includes(arg))
  }

  /** Every flag the command takes, long and short, for "did you mean". */
  private knownFlags(): string[] {
    const flags: Interfaces.FlagInput = {...this.ctor.baseFlags, ...this.ctor.flags}
    const names = ['--json']
    for (const [name, flag] of Object.entries(flags)) {
      names.push(`--${name}`)
      if (flag.char) names.push(`-${flag.char}`)
    }
    return names
  }
}

/** A values command: KEY=VALUE arguments after its own (oclif's strict parsing off). */
export abstract class ValuesCommand extends IchorCommand {
  static override strict = false
}

/** Flags that point at the upstream artifacts; every command that renders takes them. */
export const assetFlags = {
  'cilium-chart': Flags.string({description: 'Cilium chart .tgz to use instead of the pinned, fetched one', helpValue: 'FILE'}),
  'argocd-chart': Flags.string({description: 'Argo CD chart .tgz to use instead of the pinned, fetched one', helpValue: 'FILE'}),
  'kokumi-manifest': Flags.string({description: 'Kokumi install.yaml to use instead of the pinned, fetched one', helpValue: 'FILE'}),
  mirror: Flags.string({description: 'local mirror directory to take artifacts from when none was fetched (also ICHOR_MIRROR)', helpValue: 'DIR'}),
  'assets-dir': Flags.string({
    description: 'where `ichor assets fetch` put the artifacts (also ICHOR_ASSETS_DIR; default $XDG_CACHE_HOME/ichor/assets)',
    helpValue: 'DIR',
  }),
}

/** --allow-unpinned, for the commands that install or publish from an upstream artifact. */
export const allowUnpinnedFlag = {
  'allow-unpinned': Flags.boolean({
    description:
      'let a real run install a Cilium chart, Argo CD chart or Kokumi manifest that is not the pinned one (assets/lock.json); the IchorInstallation records it as unpinned',
  }),
}

/** init and restore: the registry, the Lease, the time each wait may take, and the artifacts they install. */
export const installFlags = {
  ...registryEndpointFlag,
  ...lockFlags,
  timeout: timeoutFlag(900),
  ...assetFlags,
  ...allowUnpinnedFlag,
}

/** The Cilium chart a command renders: --cilium-chart and --mirror (ciliumChartOptions reads them). */
export const ciliumChartFlags = {'cilium-chart': assetFlags['cilium-chart'], mirror: assetFlags.mirror}

/** A command that changes Cilium's release: the Talos nodes it reads its guards' facts from, and the chart (ciliumChangeOptions). */
export const ciliumChangeFlags = {...talosAccessFlags, ...ciliumChartFlags}

/** The artifacts a command publishing the stack renders (stackSourceOptions reads them). */
export const stackSourceFlags = {
  'argocd-chart': assetFlags['argocd-chart'],
  'kokumi-manifest': assetFlags['kokumi-manifest'],
  mirror: assetFlags.mirror,
  ...allowUnpinnedFlag,
}

/** `stack values set|edit`: the values change, Kokumi's registry and the artifacts it publishes from (stackValuesOptions). */
export const stackValuesFlags = {...valuesChangeFlags, ...registryEndpointFlag, ...stackSourceFlags}
