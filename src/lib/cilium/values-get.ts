// `ichor cni values get`: the user layer as the IchorInstallation stores it, or the effective values.
import type {Kube} from '../kube/client.js'
import type {Values} from '../values/path.js'
import {effectiveFor, readCniContext} from './context.js'

export async function getCiliumValues(kube: Kube, opts: {effective?: boolean}): Promise<Values> {
  const ctx = await readCniContext(kube)
  return opts.effective ? effectiveFor(ctx, ctx.user) : ctx.user
}
