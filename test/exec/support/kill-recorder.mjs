// Preload (NODE_OPTIONS=--import <this file>) that records every process.kill and
// ChildProcess.prototype.kill call of the process it is loaded into, one JSON line each,
// into the file named by ICHOR_KILL_LOG:
//   {"via":"process.kill","pid":123,"signal":"SIGTERM","self":4567}
//   {"via":"ChildProcess.kill","childPid":null,"hasHandle":true,"exited":false,"signal":"SIGTERM","self":4567}
// For safety on a shared machine it does NOT forward the calls the test forbids: a kill of
// a child without a pid (Node would signal whatever pid its native handle holds: garbage,
// or 0 = this whole process group) and process.kill of pid 0 or a negative pid. They are
// recorded as "refused" so the test fails on them without harming anyone.
import {appendFileSync} from 'node:fs'
import {ChildProcess} from 'node:child_process'

const log = process.env.ICHOR_KILL_LOG
const record = (entry) => {
  if (log) appendFileSync(log, `${JSON.stringify({...entry, self: process.pid})}\n`)
}

const originalProcessKill = process.kill.bind(process)
process.kill = function recordedProcessKill(pid, signal) {
  const numeric = Number(pid)
  const refused = !Number.isInteger(numeric) || numeric <= 0
  record({via: 'process.kill', pid: numeric, signal: signal ?? 'SIGTERM', refused})
  if (refused) return false
  return originalProcessKill(pid, signal)
}

const originalChildKill = ChildProcess.prototype.kill
ChildProcess.prototype.kill = function recordedChildKill(signal) {
  const childPid = typeof this.pid === 'number' ? this.pid : null
  const hasHandle = Boolean(this._handle)
  const refused = childPid === null && hasHandle
  record({via: 'ChildProcess.kill', childPid, hasHandle, exited: this.exitCode !== null || this.signalCode !== null, signal: signal ?? 'SIGTERM', refused})
  if (refused) return false
  return originalChildKill.call(this, signal)
}
