// Machines for tests on a bare control plane (no Talos simulator): kwok, the pod-start
// simulator, and `nodes` worker Nodes for them to play. A harness cluster (cluster.ts) registers
// its Nodes through the Talos simulator instead, as each machine's kubelet would.
import {loadKubeConfig} from './kube.js'
import {registerNode, startKwok} from './kwok.js'
import {startPodStartSimulator, type PodStartSimulator} from './pod-start-simulator.js'

export interface Machines {
  pods: PodStartSimulator
  /** The Node names, `machine-0`… */
  nodes: string[]
  stop(): Promise<void>
}

export async function startMachines(kubeconfigPath: string, opts: {nodes: number}): Promise<Machines> {
  const kc = loadKubeConfig(kubeconfigPath)
  const kwok = await startKwok({kubeconfigPath})
  const pods = startPodStartSimulator(kc)
  const nodes = Array.from({length: opts.nodes}, (_, i) => `machine-${i}`)
  for (const [i, name] of nodes.entries()) await registerNode(kc, {name, ip: `127.0.1.${i + 1}`})
  return {
    pods,
    nodes,
    async stop() {
      await pods.stop()
      await kwok.stop()
    },
  }
}
