// The step of `stack values set|edit` that stores a component's new user layer.
import {isDeepStrictEqual} from 'node:util'
import type {Session} from '../session/session.js'
import {replaceStackValues, requireInstallation, type Installation} from '../state/installation.js'
import type {StackComponent} from '../state/installation-types.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import type {Values} from '../values/path.js'

/** The component's user layer replaced exactly, at the resourceVersion it was read at. */
export function storeStackValuesTask(session: Session, component: StackComponent, prepared: Later<{cr: Installation; values: Values}>): Task {
  return {
    id: 'store-values',
    title: `Store the ${component} values in the IchorInstallation`,
    async probe() {
      const [cr, {values}] = await Promise.all([session.kube().then((kube) => requireInstallation(kube)), prepared()])
      return isDeepStrictEqual(cr.spec.stack[component].values ?? {}, values) ? holds('stored') : missing('the stored values differ')
    },
    async run() {
      const {cr, values} = await prepared()
      await replaceStackValues(await session.kube(), cr, component, values)
    },
  }
}
