// The registry tunnel is reachable only by the ichor process that opened it (issue 13,
// point 2). The tunnel's local side is tested alone: serveLocalTunnel (what openRegistryEndpoint
// serves the port-forward on; the port-forward itself is open.test.ts's subject) forwards
// each connection to the real registry of the harness instead. The second local user is
// `nobody`, through runuser.
import {spawnSync} from 'node:child_process'
import {existsSync, statSync} from 'node:fs'
import {connect} from 'node:net'
import {dirname} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {serveLocalTunnel, type RegistryEndpoint} from '../../src/lib/kube/portforward.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {startRegistry, type RunningRegistry} from '../harness/registry.js'

/** Connects as the user `nobody` (Unix socket path, or host:port) and prints `connected` or the error code. */
function connectAsNobody(target: {path: string} | {host: string; port: number}): string {
  const script = `const s=require('net').connect(${JSON.stringify(target)});s.on('connect',()=>{console.log('connected');s.destroy()});s.on('error',(e)=>console.log(e.code))`
  const r = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, '-e', script], {encoding: 'utf8', timeout: 60_000})
  return `${r.stdout}${r.stderr}`.trim()
}

describe('the registry tunnel', () => {
  let registry: RunningRegistry
  let tunnel: RegistryEndpoint
  beforeAll(async () => {
    registry = await startRegistry()
    const [host, port] = [registry.host.split(':')[0]!, Number(registry.host.split(':')[1])]
    tunnel = await serveLocalTunnel((socket) => {
      const upstream = connect({host, port})
      socket.pipe(upstream).pipe(socket)
      upstream.on('error', () => socket.destroy())
      socket.on('close', () => upstream.destroy())
    })
  }, 120_000)
  afterAll(async () => {
    await tunnel?.close()
    await registry?.stop()
  })

  it('is a Unix socket in a directory only its owner can enter, not a loopback port', () => {
    expect(tunnel.socketPath).toBeDefined()
    expect(tunnel.endpoint).not.toMatch(/127\.0\.0\.1|localhost/)
    const dir = statSync(dirname(tunnel.socketPath!))
    expect(dir.mode & 0o777).toBe(0o700)
    expect(dir.uid).toBe(process.getuid!())
  })

  it('carries the OCI client: a bundle pushed through it is in the registry', async () => {
    const client = new OciClient(tunnel.endpoint, {fetch: tunnel.fetch})
    const bundle = buildBundle([{path: 'manifest.yaml', content: 'kind: ConfigMap\n'}])
    const pushed = await publishBundle(client, {
      repository: 'ichor/tunnel-test',
      tag: 't1',
      layer: bundle.layer,
      layerDigest: bundle.layerDigest,
      annotations: {source: 'oci://test/ichor/tunnel-test', version: 't1'},
    })
    expect((await new OciClient(registry.endpoint).headManifest('ichor/tunnel-test', 't1'))?.digest).toBe(pushed.manifestDigest)
  })

  it('refuses another local user, who can reach a loopback port', () => {
    const [host, port] = registry.host.split(':')
    expect(connectAsNobody({host: host!, port: Number(port)})).toBe('connected') // the second user can connect at all
    expect(connectAsNobody({path: tunnel.socketPath!})).toBe('EACCES')
  })

  it('is gone once closed: socket and directory removed', async () => {
    const path = tunnel.socketPath!
    await tunnel.close()
    expect(existsSync(dirname(path))).toBe(false)
  })
})
