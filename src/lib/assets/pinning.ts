// A real run installs the artifacts assets/lock.json pins, or says plainly that it will not:
// a chart or manifest whose bytes differ from the pin (an older one in a mirror, a file
// given by flag) is refused unless the operator passes --allow-unpinned. A dry run only
// reads and renders, so it takes any artifact and just names it.
import {basename} from 'node:path'
import {ValidationError, type Issue} from '../errors/errors.js'
import {OVERRIDE_FLAG, type ResolvedAsset} from './resolve.js'

const ALLOW_UNPINNED_FLAG = '--allow-unpinned'

/** The refusal of unpinned artifacts: exit 2 like bad input, but about the artifacts, not the values. */
export class UnpinnedArtifactsError extends ValidationError {}

/** What the IchorInstallation records about an installed artifact. */
export interface InstalledArtifact {
  /** The file's name (not its folder: that is one machine's). */
  file: string
  version: string
  sha256: string
  /** The bytes are exactly the pinned artifact. */
  pinned: boolean
}

export function installedArtifact(a: ResolvedAsset): InstalledArtifact {
  return {file: basename(a.path), version: a.version, sha256: a.sha256, pinned: a.matchesPin}
}

/**
 * Throws (exit 2, before anything runs) when a real run would install an artifact that is not
 * the pinned one and --allow-unpinned was not given; one issue per such artifact, naming it,
 * its version and digest, the pin, and the flag.
 */
export function refuseUnpinnedArtifacts(command: string, assets: readonly ResolvedAsset[], opts: {allowUnpinned: boolean; dryRun: boolean}): void {
  if (opts.dryRun || opts.allowUnpinned) return
  const issues: Issue[] = assets.filter((a) => !a.matchesPin).map((a) => ({
    path: a.origin === 'flag' ? OVERRIDE_FLAG[a.id] : a.id,
    message: `${a.pinned.description} ${a.pinned.name} ${a.version} (${basename(a.path)}, sha256 ${a.sha256}, from ${a.origin}) is not the pinned ${a.pinned.name} ${a.pinned.version} (sha256 ${a.pinned.sha256}); `
      + `pass ${ALLOW_UNPINNED_FLAG} to install it anyway (the IchorInstallation records it as unpinned), or use the pinned one (\`ichor assets fetch\`)`,
  }))
  if (issues.length > 0) throw new UnpinnedArtifactsError(`${command}: not the pinned artifacts, nothing was changed`, issues)
}
