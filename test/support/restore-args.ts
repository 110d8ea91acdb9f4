// `ichor restore` of a harness cluster's backup onto its own machines (or others), with the artifacts and the
// registry its `init` used (the mirror's charts, the harness registry).
import type {HarnessCluster} from '../harness/cluster.js'

export function restoreArgs(
  h: HarnessCluster,
  file: string,
  stateDir: string,
  onto: {controlPlanes: string[]; workers: string[]} = {controlPlanes: h.controlPlanes, workers: h.workers},
): string[] {
  const pick = (flag: string) => [flag, h.initArgs[h.initArgs.indexOf(flag) + 1]!]
  return [
    'restore',
    '--from',
    file,
    ...onto.controlPlanes.flatMap((n) => ['--control-plane', n]),
    ...onto.workers.flatMap((n) => ['--worker', n]),
    '--state-dir',
    stateDir,
    ...['--registry-endpoint', '--timeout', '--cilium-chart', '--argocd-chart', '--kokumi-manifest'].flatMap(pick),
    '--allow-unpinned',
    '--yes',
  ]
}
