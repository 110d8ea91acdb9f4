// `ichor cni values edit`: the stored user layer in $VISUAL/$EDITOR (src/lib/values/edit-buffer.ts
// reopens a refused buffer with the problems on top). The accepted layer is then applied by
// the values-set plan.
import type {Kube} from '../kube/client.js'
import {isDeepStrictEqual} from 'node:util'
import {editValuesBuffer} from '../values/edit-buffer.js'
import {newUserLayer, type ValuesInput} from '../values/layer.js'
import type {Values} from '../values/path.js'
import {prepareValuesChange, type ChangeSources} from './change.js'
import {readCniContext} from './context.js'

const HEADER = [
  "# The user layer of Cilium's values (ichor defaults below it, ichor-owned keys above it).",
  '# Save and quit to apply; leave it unchanged to do nothing.',
]

export interface EditOutcome {
  /** undefined: the buffer was left unchanged, nothing to apply. */
  user?: Values
  base: Values
}

/** `seed`: the command line's -f/--set/KEY=VALUE, applied to the stored layer the editor opens with. */
export async function editCiliumValues(kube: Kube, sources: ChangeSources, seed?: ValuesInput): Promise<EditOutcome> {
  const base = (await readCniContext(kube)).user
  const initial = seed ? newUserLayer(base, seed) : base
  const user = await editValuesBuffer({
    header: HEADER,
    initial,
    seeded: !isDeepStrictEqual(initial, base),
    fileName: 'cilium-values.yaml',
    check: async (u) => void (await prepareValuesChange(kube, {kind: 'layer', user: u, base}, sources)),
  })
  return {user, base}
}
