// The rules of `ichor node remove` that need no cluster: which address may go, and etcd's quorum.
import {describe, expect, it} from 'vitest'
import {checkEtcdQuorum, checkNodeRemoval} from '../../src/lib/nodes/remove.js'
import type {Installation} from '../../src/lib/state/installation.js'
import {TalosctlError, type EtcdMemberStatus} from '../../src/lib/talos/talosctl.js'

const cr = (controlPlanes: string[], workers: string[], endpoint = 'https://cluster.home.arpa:6443') =>
  ({spec: {talos: {controlPlanes, workers, endpoint}}}) as unknown as Installation

const refusal = (f: () => unknown) => {
  try {
    f()
  } catch (e) {
    return e as {message: string; exitCode: number}
  }
  return undefined
}

describe('checkNodeRemoval', () => {
  const three = cr(['10.0.0.1', '10.0.0.2', '10.0.0.3'], ['10.0.0.4'])
  it.each([
    [
      'an address that is not a node',
      three,
      '10.0.0.9',
      false,
      /10\.0\.0\.9 is not a node of this cluster \(its nodes: 10\.0\.0\.1, 10\.0\.0\.2, 10\.0\.0\.3, 10\.0\.0\.4\)/,
    ],
    ['the last control plane', cr(['10.0.0.1'], ['10.0.0.4']), '10.0.0.1', false, /10\.0\.0\.1 is the last control plane/],
    [
      'the endpoint node',
      cr(['10.0.0.1', '10.0.0.2'], [], 'https://10.0.0.2:6443'),
      '10.0.0.2',
      true,
      /10\.0\.0\.2 is the cluster endpoint \(https:\/\/10\.0\.0\.2:6443\)/,
    ],
    ['an IPv6 endpoint node', cr(['fd00::1', 'fd00::2'], [], 'https://[fd00::2]:6443'), 'fd00::2', true, /fd00::2 is the cluster endpoint/],
    [
      'the last worker when the control planes take no workloads',
      three,
      '10.0.0.4',
      false,
      /10\.0\.0\.4 is the last worker and the control planes keep workloads off/,
    ],
  ])('refuses %s (exit 2)', (_, installation, node, schedulable, message) => {
    const e = refusal(() => checkNodeRemoval({node, cr: installation, controlPlanesSchedulable: schedulable}))
    expect(e?.message).toMatch(message)
    expect(e?.exitCode).toBe(2)
  })

  it('takes a control plane that is neither the last nor the endpoint, and the last worker when the control planes take workloads', () => {
    expect(checkNodeRemoval({node: '10.0.0.3', cr: three, controlPlanesSchedulable: false})).toEqual({
      role: 'controlplane',
      remainingControlPlanes: ['10.0.0.1', '10.0.0.2'],
    })
    expect(checkNodeRemoval({node: '10.0.0.4', cr: three, controlPlanesSchedulable: true}).role).toBe('worker')
  })
})

describe('checkEtcdQuorum (etcd IsReadyToRemoveVotingMember: the members that stay need a healthy majority)', () => {
  const ok = (node: string): EtcdMemberStatus => ({node, member: `m-${node}`, learner: false, errors: ''})
  const status = (entries: [string, EtcdMemberStatus | TalosctlError][]) => new Map(entries)

  it('2 of 2 staying healthy: allowed; 1 of 2: refused, naming the sick member and the numbers', () => {
    expect(() =>
      checkEtcdQuorum(
        'c',
        ['a', 'b'],
        status([
          ['a', ok('a')],
          ['b', ok('b')],
        ]),
      ),
    ).not.toThrow()
    const e = refusal(() =>
      checkEtcdQuorum(
        'c',
        ['a', 'b'],
        status([
          ['a', ok('a')],
          ['b', {...ok('b'), errors: 'NOSPACE'}],
        ]),
      ),
    )
    expect(e?.message).toMatch(/removing c would leave etcd without quorum: 2 member\(s\) stay, 2 must be healthy, 1 is \(b: member m-b reports NOSPACE\)/)
    expect(e?.exitCode).toBe(2)
  })

  it('3 staying with one silent and one a learner: refused; with only one silent: allowed (2 of 3)', () => {
    const silent = new TalosctlError('b', 'talosctl etcd status', 'connection refused')
    expect(() =>
      checkEtcdQuorum(
        'd',
        ['a', 'b', 'c'],
        status([
          ['a', ok('a')],
          ['b', silent],
          ['c', ok('c')],
        ]),
      ),
    ).not.toThrow()
    expect(
      refusal(() =>
        checkEtcdQuorum(
          'd',
          ['a', 'b', 'c'],
          status([
            ['a', ok('a')],
            ['b', silent],
            ['c', {...ok('c'), learner: true}],
          ]),
        ),
      )?.message,
    ).toMatch(/3 member\(s\) stay, 2 must be healthy, 1 is \(b: connection refused; c: member m-c is a learner\)/)
  })

  it('one staying member that did not answer at all: refused', () => {
    expect(refusal(() => checkEtcdQuorum('b', ['a'], status([])))?.message).toMatch(/1 member\(s\) stay, 1 must be healthy, 0 are \(a: no answer in time\)/)
  })
})
