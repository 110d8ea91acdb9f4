// `ichor cni values edit`: the stored user layer in $VISUAL/$EDITOR (src/lib/values/edit-buffer.ts
// reopens a refused buffer with the problems on top). The accepted layer is then applied by
// the values-set plan.
import type {Kube} from '../kube/client.js'
import {editValuesBuffer} from '../values/edit-buffer.js'
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

export async function editCiliumValues(kube: Kube, sources: ChangeSources): Promise<EditOutcome> {
  const base = (await readCniContext(kube)).user
  const user = await editValuesBuffer({
    header: HEADER, initial: base, fileName: 'cilium-values.yaml',
    check: async (u) => void (await prepareValuesChange(kube, {kind: 'layer', user: u, base}, sources)),
  })
  return {user, base}
}
