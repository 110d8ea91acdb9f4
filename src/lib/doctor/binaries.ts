// The external binaries ichor runs: found exactly as the commands find them (ICHOR_HELM /
// ICHOR_TALOSCTL, then PATH; see src/lib/exec/resolve.ts), so a binary that is missing is
// reported from the file system and never spawned.
import {helmPath, helmVersionOf, helmVersionProblem, parseHelmVersion} from '../helm/binary.js'
import {parseTalosctlClientTag, talosctlPath, talosctlVersionOf} from '../talos/talosctl.js'
import {compareVersions, parseTalosVersion, type TalosVersion} from '../talos/versions.js'
import {fail, hintOf, messageOf, ok, warn, type DoctorCheck} from './types.js'

const HELM_FIX = 'install Helm 3.18+ or 4.0.1+ and put it on PATH, or set ICHOR_HELM to its path'

/** helm is there, runs, and is a version that adopts objects with --take-ownership correctly. */
export async function checkHelm(): Promise<DoctorCheck> {
  const found = await versionOf('helm', helmPath, helmVersionOf, (error) => hintOf(error) ?? HELM_FIX)
  if ('status' in found) return found
  const {path, out} = found
  const version = parseHelmVersion(out)
  if (!version) return fail('helm', `cannot read helm's version from "${out}" (${path})`, HELM_FIX)
  const problem = helmVersionProblem(version)
  if (problem) return fail('helm', `helm ${out} at ${path} ${problem.message}`, HELM_FIX)
  return ok('helm', `helm ${out} at ${path} can adopt the Cilium release`)
}

/**
 * talosctl is there and fits the Talos version targeted. Same minor: ok. An older talosctl
 * cannot generate or validate the newer config contract (the v1.14 multi-document kinds,
 * for one): fail. A newer one generates the older contract with --talos-version, but
 * Talos recommends a matching client: warn.
 */
export async function checkTalosctl(target: TalosVersion): Promise<DoctorCheck> {
  const fix = `install talosctl ${target.tag} and put it on PATH, or set ICHOR_TALOSCTL to its path`
  const found = await versionOf('talosctl', talosctlPath, talosctlVersionOf, () => fix)
  if ('status' in found) return found
  const {path, out} = found
  const tag = parseTalosctlClientTag(out)
  let version: TalosVersion | undefined
  try {
    version = tag ? parseTalosVersion(tag.replace(/[-+].*$/, '')) : undefined
  } catch {
    version = undefined
  }
  if (!version) return warn('talosctl', `talosctl at ${path} does not say its version (no "Tag:" in \`talosctl version --client\`)`, fix)
  const sameMinor = version.major === target.major && version.minor === target.minor
  if (sameMinor) return ok('talosctl', `talosctl ${tag} at ${path} matches Talos ${target.tag}`)
  if (compareVersions(version, target) < 0) {
    return fail(
      'talosctl',
      `talosctl ${tag} at ${path} is older than the Talos ${target.tag} targeted: it cannot generate or validate that config contract`,
      fix,
    )
  }
  return warn('talosctl', `talosctl ${tag} at ${path} is newer than the Talos ${target.tag} targeted`, `${fix} (a matching client is what Talos supports)`)
}

/** Where the binary is and what its version command prints; or the failed check, with the fix for a binary that is missing or does not run. */
async function versionOf(
  name: string,
  locate: () => string,
  version: (path: string) => Promise<string>,
  runFix: (error: unknown) => string,
): Promise<{path: string; out: string} | DoctorCheck> {
  let path: string
  try {
    path = locate()
  } catch (error) {
    return fail(name, messageOf(error), runFix(undefined))
  }
  try {
    return {path, out: await version(path)}
  } catch (error) {
    return fail(name, messageOf(error), runFix(error))
  }
}
