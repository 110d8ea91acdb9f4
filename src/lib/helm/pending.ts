// A release left pending-install/-upgrade/-rollback by a killed run. The helm child of a
// SIGKILLed ichor is orphaned, not killed: it usually finishes on its own, so first wait
// for it. A record still pending after that describes an operation nobody is running any
// more (helm would refuse every later upgrade with "another operation is in progress"):
// its record alone is removed, so the release is back at its last completed revision and
// the next operation gets the same revision number an uninterrupted run would have.
import type {Kube} from '../kube/client.js'
import {deleteObject} from '../kube/objects.js'
import {readReleaseRecord, type ReleaseRecord} from './release.js'

export interface SettleOptions {
  /** How long a pending operation may still take to finish (default 60 s). */
  waitMs?: number
  pollMs?: number
  progress?: (message: string) => void
}

export const isPending = (record: ReleaseRecord | undefined): boolean => record?.status.startsWith('pending') ?? false

/** Waits for or recovers a pending release; returns the release's newest record afterwards. */
export async function settlePendingRelease(kube: Kube, release: string, namespace: string, options: SettleOptions = {}): Promise<ReleaseRecord | undefined> {
  const read = () => readReleaseRecord(kube, release, namespace)
  let record = await read()
  if (!isPending(record)) return record
  options.progress?.(`release ${release} revision ${record!.revision} is ${record!.status}: waiting for the interrupted helm to finish`)
  const deadline = Date.now() + (options.waitMs ?? 60_000)
  while (Date.now() < deadline && isPending(record)) {
    await new Promise((r) => setTimeout(r, options.pollMs ?? 1000))
    record = await read()
  }
  while (isPending(record)) {
    await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace, name: record!.secretName})
    options.progress?.(`removed the record of revision ${record!.revision} (${record!.status}), left by an interrupted helm`)
    record = await read()
  }
  return record
}
