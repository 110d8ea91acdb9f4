// The step of `stack values set|edit` that stores a component's new user layer.
import {isDeepStrictEqual} from 'node:util'
import {FIELD_MANAGER, INSTALLATION} from '../constants.js'
import {isConflict} from '../kube/client.js'
import type {Session} from '../session/session.js'
import {installationChanged, requireInstallation, writeInstallationSpec, type Installation} from '../state/installation.js'
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
      const kube = await session.kube()
      // Server-side apply alone cannot remove a key from this free-form subtree: a map it empties
      // is stored as null, which the schema refuses. The layer is replaced exactly first (a JSON
      // patch `add` replaces a member that exists), then applied, so ichor's apply owns it all.
      // Both carry the resourceVersion the layer was read at: a patch whose result names another
      // version than the stored one is refused with a 409 (kubernetes v1.36.3 staging/src/k8s.io/
      // apiserver/pkg/registry/generic/registry/store.go, Store.Update), so a change stored
      // meanwhile is never dropped.
      let patched: Installation
      try {
        patched = await kube.request<Installation>('PATCH', `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}/${INSTALLATION.name}`, {
          body: [
            {op: 'replace', path: '/metadata/resourceVersion', value: cr.metadata.resourceVersion},
            {op: 'add', path: `/spec/stack/${component}/values`, value: values},
          ],
          contentType: 'application/json-patch+json',
          query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
        })
      } catch (error) {
        if (isConflict(error)) throw await installationChanged(kube, cr, error)
        throw error
      }
      const spec = {...cr.spec, stack: {...cr.spec.stack, [component]: {values}}}
      await writeInstallationSpec(kube, spec, {readAt: patched})
    },
  }
}
