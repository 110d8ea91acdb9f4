// Issue 38 point 1: ichor tells the helm it started from any other by a token of that one
// process, never by the release's name (another cluster's helm may work on a release of the
// same name) nor by labels helm copies from one revision to the next.
import {spawn} from 'node:child_process'
import {describe, expect, it} from 'vitest'
import {HELM_RUN_LABEL, helmRunningHere, machineMark, newRunToken} from '../../src/lib/helm/local-helms.js'
import {ichorWrote, type RevisionLabel} from '../../src/lib/helm/pending.js'
import {upgradeArgs} from '../../src/lib/helm/release.js'

const rev = (revision: number, status: string, runToken?: string): RevisionLabel => ({
  secretName: `sh.helm.release.v1.r.v${revision}`,
  revision,
  status,
  runToken,
})

describe('ichorWrote', () => {
  it('an install or upgrade record is ichor’s when its token is its own, not the one the revision before carries', () => {
    expect(ichorWrote({revision: 1, status: 'pending-install', labels: {[HELM_RUN_LABEL]: 'a'}}, [rev(1, 'pending-install', 'a')])).toBe(true)
    const history = [rev(3, 'pending-upgrade', 'b'), rev(2, 'deployed', 'b'), rev(1, 'superseded')]
    // helm copied revision 2's labels: an operator's plain helm upgrade.
    expect(ichorWrote({revision: 3, status: 'pending-upgrade', labels: {[HELM_RUN_LABEL]: 'b'}}, history)).toBe(false)
    expect(ichorWrote({revision: 3, status: 'pending-upgrade', labels: {[HELM_RUN_LABEL]: 'c'}}, history)).toBe(true)
    expect(ichorWrote({revision: 3, status: 'pending-upgrade', labels: {}}, history)).toBe(false)
  })

  it('a rollback record is ichor’s only while the helm ichor started for the failed upgrade it rolls back still runs on this machine', () => {
    const here = machineMark()!
    const upgrade = (status: string, token: string, machine: string | undefined = here) => ({...rev(2, status, token), machine})
    const rollback = {revision: 3, status: 'pending-rollback', labels: {[HELM_RUN_LABEL]: 'a'}}
    const runs = (token: string) => token === 'b'
    // ichor's --atomic / --rollback-on-failure upgrade failed and its helm is rolling it back.
    expect(ichorWrote(rollback, [upgrade('failed', 'b'), rev(1, 'superseded', 'a')], runs)).toBe(true)
    // The operator's own `helm rollback` right after ichor's upgrade deployed (issue 38 point 1).
    expect(ichorWrote(rollback, [upgrade('superseded', 'b'), rev(1, 'superseded', 'a')], runs)).toBe(false)
    // ichor's upgrade failed but its helm is gone: whoever rolls back now is not provably ichor's.
    expect(ichorWrote(rollback, [upgrade('failed', 'b'), rev(1, 'superseded', 'a')], () => false)).toBe(false)
    // Another machine's helm: its process cannot be checked from here.
    expect(ichorWrote(rollback, [upgrade('failed', 'b', 'elsewhere'), rev(1, 'superseded', 'a')], runs)).toBe(false)
    // The upgrade's token was copied forward: an operator's upgrade, not ichor's.
    expect(ichorWrote(rollback, [upgrade('failed', 'a'), rev(1, 'superseded', 'a')], () => true)).toBe(false)
  })
})

describe('helmRunningHere', () => {
  it('finds the process started with the token in its --labels, and no other working on a release of the same name', async () => {
    const token = newRunToken()
    expect(token).not.toBe(newRunToken())
    const args = upgradeArgs({major: 3}, {kubeconfig: '/dev/null', release: 'cilium', namespace: 'kube-system', chartPath: 'chart', values: {}})
    const label = args[args.indexOf('--labels') + 1]!
    const theirs = label
      .split(',')
      .find((l) => l.startsWith(`${HELM_RUN_LABEL}=`))!
      .split('=')[1]!
    // A process with helm's arguments (a stand-in: node ignores what follows the script).
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', ...args], {stdio: 'ignore'})
    const mine = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', 'upgrade', 'cilium', '--labels', `a=1,${HELM_RUN_LABEL}=${token}`], {
      stdio: 'ignore',
    })
    try {
      await new Promise((r) => setTimeout(r, 200))
      expect(helmRunningHere(token)).toBe(true)
      expect(helmRunningHere(theirs)).toBe(true)
      expect(helmRunningHere(newRunToken())).toBe(false)
      mine.kill('SIGKILL')
      await new Promise((r) => mine.on('close', r))
      expect(helmRunningHere(token)).toBe(false)
    } finally {
      mine.kill('SIGKILL')
      other.kill('SIGKILL')
    }
  })
})
