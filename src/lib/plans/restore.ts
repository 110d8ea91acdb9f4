// `ichor restore --from FILE --control-plane ADDR … [--worker ADDR …]`: init's plan, with the
// backup standing in for the cluster's stored state until etcd is back (backup/restore.ts). The
// machine configs come from the backup's Talos bundle, so the cluster keeps its identity
// (certificates, tokens and kubeconfigs stay valid); the first control plane bootstraps etcd from
// the backup's snapshot; the rest is init's convergence: Cilium's release and the stack come back
// from etcd, bundles the registry lost are published again, Orders point at the same digests.
import {existsSync, statSync} from 'node:fs'
import {resolve} from 'node:path'
import {openRestoreSource} from '../backup/restore.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {givenStateKey, missingStateKeyError, promptStateKey} from '../state/state-key.js'
import {consentNeeded} from './consent.js'
import {init, type InitOutcome, type InitRequest} from './init-plan.js'

export interface RestoreRequest extends Omit<InitRequest, 'flags' | 'values' | 'promotion' | 'outputDir' | 'restore' | 'stateKey' | 'allowReboot'> {
  /** --from */
  from: string
  controlPlanes: string[]
  workers: string[]
  /** --endpoint; default: the backup's. */
  endpoint?: string
}

export type RestoreOutcome = Extract<InitOutcome, {kind: 'plan'}> & {from: string}

export async function restore(req: RestoreRequest): Promise<RestoreOutcome> {
  // The confirmation rule first, as for every command that changes a cluster (consent.ts).
  const interactive = consentNeeded({command: 'restore', yes: req.yes, dryRun: false, json: req.json}) === 'ask'
  const path = resolve(req.from)
  if (!existsSync(path) || !statSync(path).isFile()) throw new IchorError(`--from: no such file ${req.from}`, {exitCode: EXIT.usage})
  if (req.controlPlanes.length === 0)
    throw new IchorError('--control-plane: at least one is needed (the machines in maintenance mode the cluster comes back on)', {exitCode: EXIT.usage})
  const key = (await givenStateKey(req.statePassphraseFile)) ?? (interactive ? await promptStateKey({confirm: false}) : undefined)
  if (!key) throw missingStateKeyError('ichor restore: the backup is encrypted with the key that seals the Talos bundle')
  return withPrivateTempDir('ichor-restore-', async (dir) => {
    const source = await openRestoreSource(path, key, dir)
    const talos = source.spec.talos
    const outcome = await init({
      ...req,
      dryRun: false,
      flags: {clusterName: talos.clusterName, endpoint: req.endpoint ?? talos.endpoint, controlPlanes: req.controlPlanes, workers: req.workers},
      values: {},
      stateKey: key,
      restore: source,
    })
    if (outcome.kind !== 'plan') throw new Error('restore: init ran offline')
    return {...outcome, from: path}
  })
}
