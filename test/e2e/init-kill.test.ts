// Kill anywhere: `ichor init` SIGKILLed at every task boundary in turn (and inside the
// long helm adoption), rerun each time, ends in the same state as an uninterrupted run,
// with the generated passwords it created first unchanged. Harness as in init.test.ts.
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {runIchor, startHarnessCluster, type CliRun, type HarnessCluster, jsonEvents} from '../harness/cluster.js'
import {canonicalDump} from '../harness/dump.js'

type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; tasks?: {id: string}[]}


async function secretValues(kube: Kube, namespace: string, name: string) {
  return (await getObject<KubeObject & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace}))?.data
}

describe('ichor init killed at every task boundary converges to the uninterrupted end state', () => {
  let reference: HarnessCluster
  let killed: HarnessCluster
  beforeAll(async () => {
    ;[reference, killed] = await Promise.all([startHarnessCluster(), startHarnessCluster()])
  }, 600_000)
  afterAll(async () => Promise.all([reference?.stop(), killed?.stop()]))

  it('kills, reruns, and compares canonical dumps; passwords are never regenerated', async () => {
    const whole = await runIchor([...reference.initArgs, '--json'], reference.env)
    expect(whole.code, whole.stderr).toBe(0)
    const taskIds = (jsonEvents(whole).find((e) => e.event === 'start') as Event).tasks!.map((t) => t.id)
    expect(taskIds.length).toBeGreaterThan(15)
    const expected = await canonicalDump(await connectKube({kubeconfig: reference.cp.kubeconfigPath}), reference)

    const kube = await connectKube({kubeconfig: killed.cp.kubeconfigPath})
    let firstPasswords: Record<string, string> | undefined
    const log: string[] = []
    // At each boundary: SIGKILL as task k begins (tasks before it have finished).
    for (let k = 0; k < taskIds.length; k++) {
      const run = await runIchor([...killed.initArgs, '--json'], killed.env, {killOn: (e) => e.event === 'task' && e.index === k && e.status === 'checking'})
      log.push(`kill before ${taskIds[k]}: ${run.signal ?? `exit ${run.code}`}`)
      expect(run.code === 0 || run.signal === 'SIGKILL', `${taskIds[k]}: ${run.stderr}\n${run.stdout.slice(-3000)}`).toBe(true)
      const admin = await secretValues(kube, 'ichor-system', 'ichor-kokumi-admin').catch(() => undefined)
      if (admin && !firstPasswords) firstPasswords = admin
      if (k === taskIds.indexOf('adopt-cilium')) {
        // Once inside a long task: helm install --take-ownership is running.
        let child: {kill(signal: NodeJS.Signals): boolean} | undefined
        const inside = await runIchor([...killed.initArgs, '--json'], killed.env, {
          onStart: (c) => (child = c),
          killOn: (e) => {
            if (e.event === 'task' && e.id === 'adopt-cilium' && e.status === 'running') setTimeout(() => child?.kill('SIGKILL'), 400)
            return false
          },
        })
        log.push(`kill inside adopt-cilium: ${inside.signal ?? `exit ${inside.code}`}`)
      }
    }
    const last = await runIchor([...killed.initArgs, '--json'], killed.env)
    expect(last.code, `${log.join('\n')}\n${last.stderr}\n${last.stdout.slice(-3000)}`).toBe(0)
    expect(log.filter((l) => l.endsWith('SIGKILL')).length).toBeGreaterThan(taskIds.length - 2)

    expect(await canonicalDump(kube, killed)).toEqual(expected)
    expect(firstPasswords).toBeDefined()
    expect(await secretValues(kube, 'ichor-system', 'ichor-kokumi-admin')).toEqual(firstPasswords)
    // And one more rerun changes nothing.
    const again = await runIchor([...killed.initArgs, '--json'], killed.env)
    expect(jsonEvents(again).find((e) => e.event === 'end')?.changed).toBe(false)
  }, 900_000)
})
