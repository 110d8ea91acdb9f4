// init's own steps beside the concerns' (plans/init.ts lists them in order): the read-only
// validation that heads the list, and the wrapper of the steps that need the API server.
import type {InitRender} from '../../init/render.js'
import type {Session} from '../../session/session.js'
import type {Reachability} from '../../talos/talosctl.js'
import {holds, missing} from '../../tasks/probe.js'
import type {Later, ProbeResult, Task} from '../../tasks/types.js'

/** Inputs, artifacts and values were checked by the render; every node must answer before any is touched. */
export function validateInitTask(d: {render: Later<InitRender>; nodes: Later<Reachability[]>}): Task {
  return {
    id: 'validate',
    title: 'Validate inputs, artifacts and Cilium values; probe the nodes (read-only)',
    mutating: false,
    check: true,
    async probe() {
      const [render, nodes] = await Promise.all([d.render(), d.nodes()])
      const maintenance = nodes.filter((n) => n.state === 'maintenance').length
      return holds(`values valid (Cilium ${render.assets.cilium.version}); ${nodes.length} node(s) answer, ${maintenance} in maintenance mode`)
    },
    async run() {},
  }
}

/**
 * Steps that read the cluster: until it answers (a dry run before bootstrap), they would all
 * run, unless `holdsWithout` knows from the inputs alone that one has nothing to do.
 */
export function onCluster(session: Session, task: Task, o: {holdsWithout?: () => Promise<ProbeResult | undefined>} = {}): Task {
  const {enter} = task
  return {
    ...task,
    // What a step opens as it starts (the registry tunnel) needs the cluster too.
    ...(enter && {
      async enter() {
        if (await session.clusterAnswers()) await enter()
      },
    }),
    async probe() {
      if (!(await session.clusterAnswers())) return (await o.holdsWithout?.()) ?? missing('the cluster does not answer yet')
      return task.probe()
    },
  }
}
