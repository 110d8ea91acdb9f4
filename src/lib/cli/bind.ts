// The one place the shared flag sets (flags.ts, base.ts) become the options lib takes, as Helm
// binds its flags to an action's options in one function per set: a command names the sets it
// has, never a flag-by-flag copy of them.
import type {PlanOptions} from '../plans/options.js'
import type {StackArtifactSources} from '../stack/from-installation.js'
import {outputModeFor} from '../tasks/engine.js'
import type {StackComponent} from '../state/installation-types.js'
import {valuesInputFrom, type ValuesFlags} from './values-args.js'

/** kubeFlags, a timeout, --dry-run, lockFlags and yesFlag, as oclif parsed them (a command may lack some). */
export interface PlanFlags {
  kubeconfig?: string
  context?: string
  timeout: number
  'dry-run'?: boolean
  'break-lock'?: boolean
  yes?: boolean
}

/** What every plan takes; `json` is the command's --json. */
export function planOptions(flags: PlanFlags, json: boolean): PlanOptions & {yes: boolean; json: boolean} {
  return {
    kubeconfig: flags.kubeconfig,
    context: flags.context,
    timeoutMs: flags.timeout,
    dryRun: flags['dry-run'] ?? false,
    breakLock: flags['break-lock'],
    yes: flags.yes ?? false,
    json,
    output: outputModeFor({json}),
  }
}

/** talosAccessFlags and statePassphraseFlags. */
export function talosOptions(flags: {talosconfig?: string; 'state-dir'?: string; 'state-passphrase-file'?: string}): {
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
} {
  return {talosconfig: flags.talosconfig, stateDir: flags['state-dir'], statePassphraseFile: flags['state-passphrase-file']}
}

/** --cilium-chart and --mirror. */
export function ciliumChartOptions(flags: {'cilium-chart'?: string; mirror?: string}): {chart?: string; mirror?: string} {
  return {chart: flags['cilium-chart'], mirror: flags.mirror}
}

/** ciliumChangeFlags: talosAccessFlags and the chart. */
export function ciliumChangeOptions(flags: {talosconfig?: string; 'state-dir'?: string; 'cilium-chart'?: string; mirror?: string}) {
  return {...talosOptions(flags), ...ciliumChartOptions(flags)}
}

/** --argocd-chart, --kokumi-manifest, --mirror and --allow-unpinned of a command that publishes the stack. */
export function stackSourceOptions(
  flags: {'argocd-chart'?: string; 'kokumi-manifest'?: string; mirror?: string; 'allow-unpinned'?: boolean; 'dry-run'?: boolean},
  command: string,
): StackArtifactSources {
  return {
    argocdChart: flags['argocd-chart'],
    kokumiManifest: flags['kokumi-manifest'],
    mirror: flags.mirror,
    pinning: {command: `ichor ${command}`, dryRun: flags['dry-run'] ?? false, allowUnpinned: flags['allow-unpinned'] ?? false},
  }
}

/** A `stack values set|edit` run: its component, the values change (arguments after COMPONENT), the registry and the artifacts. */
export function stackValuesOptions(
  component: string,
  argv: unknown[],
  flags: ValuesFlags & {'registry-endpoint'?: string} & Parameters<typeof stackSourceOptions>[0],
  command: string,
) {
  return {
    component: component as StackComponent,
    input: valuesInputFrom(argv.slice(1), flags),
    registryEndpoint: flags['registry-endpoint'],
    sources: stackSourceOptions(flags, command),
  }
}

/** assetFlags (base.ts): the artifacts init and restore install from. */
export function installSources(f: {'cilium-chart'?: string; 'argocd-chart'?: string; 'kokumi-manifest'?: string; mirror?: string; 'assets-dir'?: string}) {
  return {ciliumChart: f['cilium-chart'], argocdChart: f['argocd-chart'], kokumiManifest: f['kokumi-manifest'], mirror: f.mirror, assetsDir: f['assets-dir']}
}
