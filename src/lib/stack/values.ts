// `ichor stack values diff|edit argocd|kokumi`: a proposed user layer for one component against
// what ichor last published for it. Diff: the effective values (the stored layer's against the
// proposed one's) and the bundle's objects (the manifest.yaml of the published bundle, pulled
// from Kokumi's registry, against the proposed render). Edit: the stored layer in the editor,
// each buffer checked by rendering it, as `stack values set` would.
import {isDeepStrictEqual} from 'node:util'
import {stringify} from 'yaml'
import {UnpinnedArtifactsError} from '../assets/pinning.js'
import {resolveAsset} from '../assets/resolve.js'
import {unifiedDiff} from '../text/diff.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import type {Session} from '../session/session.js'
import {editValuesBuffer} from '../values/edit-buffer.js'
import {newUserLayer, type ValuesInput} from '../values/layer.js'
import type {Values} from '../values/path.js'
import {renderStackFromInstallation, type StackArtifactSources, type StackRender} from './from-installation.js'
import {validateKokumiValues} from './kokumi.js'
import type {StackComponent} from '../state/installation-types.js'
import {readPublishedManifest} from './drift.js'
import {argocdEffectiveValues} from './prepare.js'
import {requireInstallation} from '../state/installation.js'
import {EXIT} from '../errors/exit-codes.js'

export interface StackValuesDiff {
  component: StackComponent
  /** Effective values, last published against proposed. Empty when equal. */
  values: string
  /** The bundle's manifest.yaml, last published against proposed. Empty when equal. */
  manifest: string
  changed: boolean
  published?: {tag: string; digest: string}
  proposed: {tag: string; digest: string}
}

const yaml = (v: unknown) => stringify(v, {sortMapEntries: true})

/** The values a component is rendered with: Argo CD's through the values engine, Kokumi's as validated. */
function stackEffectiveValues(component: StackComponent, user: Values, sources: StackArtifactSources): Values {
  if (component === 'kokumi') return validateKokumiValues(user) as Values
  return argocdEffectiveValues(resolveAsset('argocd', {override: sources.argocdChart, mirror: sources.mirror}).path, user)
}

/** Renders the stack with `values` as the component's layer; bad values are exit 2 naming the component. */
export async function renderWithValues(session: Session, sources: StackArtifactSources, component: StackComponent, values: Values): Promise<StackRender> {
  return renderStackFromInstallation(session, sources, {component, values}).catch((error: unknown) => {
    if (error instanceof ValidationError && !(error instanceof UnpinnedArtifactsError))
      throw new ValidationError(`${component} values are invalid, nothing was changed`, error.issues)
    throw error
  })
}

export async function diffStackValues(
  session: Session,
  component: StackComponent,
  input: ValuesInput,
  sources: StackArtifactSources,
): Promise<StackValuesDiff> {
  const cr = await requireInstallation(await session.kube())
  const stored = cr.spec.stack[component].values ?? {}
  const proposed = newUserLayer(stored, input)
  const stack = await renderWithValues(session, sources, component, proposed)
  const c = stack.components[component]
  const recorded = cr.status?.stack?.[component]
  const published = recorded && {tag: recorded.publishedTag, digest: recorded.digest}
  let before = published ? await readPublishedManifest(await session.registry(), component, published.tag) : undefined
  let beforeLabel = published ? `published ${published.tag} (manifest.yaml)` : 'nothing published'
  if (published && before === undefined) {
    // The registry lost it (`ichor stack sync` puts it back): the stored layer renders the same bytes.
    before = (await renderWithValues(session, sources, component, stored)).components[component].rendered.manifest
    beforeLabel = `stored values, rendered (the registry lost ${published.tag}) (manifest.yaml)`
  }
  const [values, manifest] = await Promise.all([
    unifiedDiff(yaml(stackEffectiveValues(component, stored, sources)), yaml(stackEffectiveValues(component, proposed, sources)), [
      `published ${component} (effective values)`,
      'proposed (effective values)',
    ]),
    unifiedDiff(before ?? '', c.rendered.manifest, [beforeLabel, `proposed ${c.bundle.tag} (manifest.yaml)`]),
  ])
  return {
    component,
    values,
    manifest,
    changed: values !== '' || manifest !== '',
    published,
    proposed: {tag: c.bundle.tag, digest: c.bundle.artifact.manifestDigest},
  }
}

const HEADER: Record<StackComponent, string[]> = {
  argocd: [
    "# The user layer of Argo CD's chart values (ichor defaults below it, ichor-owned keys above it).",
    '# Save and quit to republish the bundle and move the Order; leave it unchanged to do nothing.',
  ],
  kokumi: [
    "# The user layer of Kokumi's values (only the keys ichor maps to a patch of Kokumi's manifest).",
    '# Save and quit to republish the bundle and move the Order; leave it unchanged to do nothing.',
  ],
}

/** The edited layer (undefined: left unchanged) and the layer the editor started from. */
/** `seed`: the command line's -f/--set/KEY=VALUE, applied to the stored layer the editor opens with. */
export async function editStackValues(
  session: Session,
  component: StackComponent,
  sources: StackArtifactSources,
  seed?: ValuesInput,
): Promise<{user?: Values; base: Values}> {
  const base = (await requireInstallation(await session.kube())).spec.stack[component].values ?? {}
  const initial = seed ? newUserLayer(base, seed) : base
  const user = await editValuesBuffer({
    header: HEADER[component],
    initial,
    seeded: !isDeepStrictEqual(initial, base),
    fileName: `${component}-values.yaml`,
    check: async (u) => void (await renderWithValues(session, sources, component, u)),
  })
  return {user, base}
}

/** A layer from the editor is refused when the stored one moved meanwhile (another run changed it). */
export function checkEditBase(component: StackComponent, stored: Values, base: Values | undefined): void {
  if (base !== undefined && !isDeepStrictEqual(stored, base)) {
    throw new IchorError(`the stored ${component} values changed while the editor was open; nothing was changed`, {
      exitCode: EXIT.usage,
      hint: `run \`ichor stack values edit ${component}\` again to edit the current values`,
    })
  }
}
