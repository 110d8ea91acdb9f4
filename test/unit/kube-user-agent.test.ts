// Every request names ichor in its User-Agent, as kubectl's do (`kubectl/VERSION (OS/ARCH)`):
// an API server's audit log and request metrics then tell ichor's requests from other clients'.
import {expect, it} from 'vitest'
import {sessionFixture} from '../support/session-fixture.js'

it('every request to the API server carries ichor (OS/ARCH) node/VERSION as its User-Agent', async () => {
  const {session, userAgents} = await sessionFixture([{apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'kube-system'}}])
  const kube = await session.kube()
  await kube.request('GET', '/api/v1/namespaces/kube-system')
  expect(userAgents.length).toBeGreaterThanOrEqual(2) // /version, then the GET
  for (const ua of userAgents) expect(ua).toBe(`ichor (${process.platform}/${process.arch}) node/${process.version}`)
})
