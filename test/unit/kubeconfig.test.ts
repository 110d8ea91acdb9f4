// The kubeconfig loader and request credentials without client-node: file and context
// choice like kubectl, relative paths, token files, exec credential plugins (real
// processes: small scripts written by the test), and TLS against a local HTTPS server
// with certificates made by openssl.
import {execFileSync} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import https from 'node:https'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {stringify} from 'yaml'
import {requestAuth} from '../../src/lib/kube/credentials.js'
import {loadKubeconfig, type Kubeconfig} from '../../src/lib/kube/kubeconfig.js'

let dir: string
const savedEnv = {KUBECONFIG: process.env.KUBECONFIG, HOME: process.env.HOME}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ichor-kubeconfig-'))
})
afterAll(() => rmSync(dir, {recursive: true, force: true}))
afterEach(() => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

let fileCount = 0
/** Writes a kubeconfig (object) into `sub` (a directory under the test dir), returns its path. */
function kubeconfigFile(doc: Record<string, unknown>, sub = `f${++fileCount}`): string {
  mkdirSync(join(dir, sub), {recursive: true})
  const file = join(dir, sub, 'config')
  writeFileSync(file, stringify(doc))
  return file
}

function config(opts: {cluster?: Record<string, unknown>; user?: Record<string, unknown>; context?: Record<string, unknown>; name?: string} = {}) {
  const name = opts.name ?? 'dev'
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': name,
    clusters: [{name, cluster: {server: 'https://127.0.0.1:6443', ...opts.cluster}}],
    users: [{name, user: opts.user ?? {token: 'static-token'}}],
    contexts: [{name, context: {cluster: name, user: name, ...opts.context}}],
  }
}

async function applied(kc: Kubeconfig): Promise<https.RequestOptions & {headers: Record<string, unknown>}> {
  const options: https.RequestOptions = {headers: {Accept: 'application/json'}}
  await requestAuth(kc).apply(options)
  return options as https.RequestOptions & {headers: Record<string, unknown>}
}

describe('choosing the file and the context', () => {
  it('uses current-context, or --context, and exposes its cluster, user and namespace', () => {
    const file = kubeconfigFile({
      ...config(),
      clusters: [
        {name: 'dev', cluster: {server: 'https://dev:6443'}},
        {name: 'prod', cluster: {server: 'https://prod:6443'}},
      ],
      users: [
        {name: 'dev', user: {token: 'd'}},
        {name: 'prod', user: {token: 'p'}},
      ],
      contexts: [
        {name: 'dev', context: {cluster: 'dev', user: 'dev'}},
        {name: 'prod', context: {cluster: 'prod', user: 'prod', namespace: 'ops'}},
      ],
    })
    const dev = loadKubeconfig({kubeconfig: file})
    expect([dev.context, dev.cluster?.server, dev.user?.token, dev.namespace]).toEqual(['dev', 'https://dev:6443', 'd', undefined])
    const prod = loadKubeconfig({kubeconfig: file, context: 'prod'})
    expect([prod.context, prod.cluster?.server, prod.user?.token, prod.namespace]).toEqual(['prod', 'https://prod:6443', 'p', 'ops'])
    expect(prod.source).toBe(`--kubeconfig ${file}`)
    expect(prod.files).toEqual([file])
  })

  it('names a missing context and lists the known ones; needs a current-context otherwise', () => {
    const file = kubeconfigFile(config())
    const unknown = (() => {
      try {
        return loadKubeconfig({kubeconfig: file, context: 'prod'})
      } catch (error) {
        return error as Error & {hint?: string}
      }
    })() as Error & {hint?: string}
    expect(unknown.message).toBe(`kubeconfig has no context "prod" (--kubeconfig ${file})`)
    expect(unknown.hint).toBe('known contexts: dev')

    const noCurrent = kubeconfigFile({...config(), 'current-context': undefined})
    expect(() => loadKubeconfig({kubeconfig: noCurrent})).toThrow(`kubeconfig has no current-context (--kubeconfig ${noCurrent})`)
    expect(loadKubeconfig({kubeconfig: noCurrent, context: 'dev'}).context).toBe('dev')

    const dangling = kubeconfigFile({...config(), 'current-context': 'gone'})
    expect(() => loadKubeconfig({kubeconfig: dangling})).toThrow(`kubeconfig's current-context "gone" is not defined in it (--kubeconfig ${dangling})`)

    expect(() => loadKubeconfig({kubeconfig: join(dir, 'nope')})).toThrow(`kubeconfig ${join(dir, 'nope')} (from --kubeconfig) does not exist`)
    expect(() => loadKubeconfig({kubeconfigYaml: 'clusters: [{cluster: {server: x}}]'})).toThrow(
      'cannot read kubeconfig (kubeconfig given in memory): clusters[0].name missing',
    )
  })

  it('merges the KUBECONFIG list first-wins, skipping missing files, like kubectl', () => {
    const first = kubeconfigFile({
      clusters: [{name: 'shared', cluster: {server: 'https://first:6443'}}],
      users: [{name: 'shared', user: {token: 'first'}}],
      contexts: [],
    })
    const second = kubeconfigFile({
      'current-context': 'b',
      clusters: [
        {name: 'shared', cluster: {server: 'https://second:6443'}},
        {name: 'only-second', cluster: {server: 'https://only-second:6443'}},
      ],
      users: [{name: 'shared', user: {token: 'second'}}],
      contexts: [
        {name: 'b', context: {cluster: 'shared', user: 'shared'}},
        {name: 'c', context: {cluster: 'only-second', user: 'shared'}},
      ],
    })
    const third = kubeconfigFile({'current-context': 'c', clusters: [], users: [], contexts: []})
    process.env.KUBECONFIG = [join(dir, 'missing'), first, second, third].join(delimiter)
    const kc = loadKubeconfig()
    // current-context from the first file that sets one; each name from the first file that defines it.
    expect([kc.context, kc.cluster?.server, kc.user?.token]).toEqual(['b', 'https://first:6443', 'first'])
    expect(kc.files).toEqual([first, second, third])
    expect(loadKubeconfig({context: 'c'}).cluster?.server).toBe('https://only-second:6443')
    // --kubeconfig wins over KUBECONFIG
    expect(loadKubeconfig({kubeconfig: second}).user?.token).toBe('second')

    process.env.KUBECONFIG = join(dir, 'missing')
    expect(() => loadKubeconfig()).toThrow(`none of the files in KUBECONFIG (${join(dir, 'missing')}) exists`)
  })

  it('falls back to ~/.kube/config', () => {
    delete process.env.KUBECONFIG
    const home = join(dir, 'home')
    mkdirSync(join(home, '.kube'), {recursive: true})
    process.env.HOME = home
    expect(() => loadKubeconfig()).toThrow('no kubeconfig found')
    writeFileSync(join(home, '.kube', 'config'), stringify(config({name: 'home'})))
    const kc = loadKubeconfig()
    expect([kc.context, kc.source]).toEqual(['home', join(home, '.kube', 'config')])
  })

  it('resolves relative paths against the directory of the file that holds them', () => {
    const a = kubeconfigFile(
      config({
        cluster: {'certificate-authority': 'ca.pem'},
        user: {
          'client-certificate': 'certs/client.pem',
          'client-key': '/abs/key.pem',
          tokenFile: 'token',
          exec: {apiVersion: 'client.authentication.k8s.io/v1beta1', command: './bin/plugin'},
        },
      }),
      'dir-a',
    )
    const b = kubeconfigFile(
      {
        clusters: [{name: 'b', cluster: {server: 'https://b', 'certificate-authority': 'ca-b.pem'}}],
        users: [{name: 'b', user: {exec: {apiVersion: 'client.authentication.k8s.io/v1beta1', command: 'aws-iam-authenticator'}}}],
        contexts: [{name: 'b', context: {cluster: 'b', user: 'b'}}],
      },
      'dir-b',
    )
    process.env.KUBECONFIG = [a, b].join(delimiter)
    const kcA = loadKubeconfig()
    expect(kcA.cluster?.certificateAuthority).toBe(join(dir, 'dir-a', 'ca.pem'))
    expect(kcA.user?.clientCertificate).toBe(join(dir, 'dir-a', 'certs', 'client.pem'))
    expect(kcA.user?.clientKey).toBe('/abs/key.pem')
    expect(kcA.user?.tokenFile).toBe(join(dir, 'dir-a', 'token'))
    expect(kcA.user?.exec?.command).toBe(join(dir, 'dir-a', 'bin', 'plugin'))
    const kcB = loadKubeconfig({context: 'b'})
    expect(kcB.cluster?.certificateAuthority).toBe(join(dir, 'dir-b', 'ca-b.pem'))
    // a bare command name is looked up on PATH, not resolved
    expect(kcB.user?.exec?.command).toBe('aws-iam-authenticator')
    // the self-contained document carries the resolved paths
    expect(kcA.document.clusters[0]!.cluster['certificate-authority']).toBe(join(dir, 'dir-a', 'ca.pem'))
  })
})

describe('request credentials', () => {
  it('sends the inline token, or basic auth, and impersonation headers', async () => {
    expect((await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config())}))).headers.Authorization).toBe('Bearer static-token')
    const basic = await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: {username: 'admin', password: 's3cret'}}))}))
    expect(basic.auth).toBe('admin:s3cret')
    expect(basic.headers.Authorization).toBeUndefined()
    const imp = await applied(
      loadKubeconfig({
        kubeconfig: kubeconfigFile(
          config({user: {token: 't', as: 'jane', 'as-groups': ['dev', 'ops'], 'as-uid': '42', 'as-user-extra': {scopes: ['a', 'b']}}}),
        ),
      }),
    )
    expect(imp.headers).toMatchObject({
      'Impersonate-User': 'jane',
      'Impersonate-Group': ['dev', 'ops'],
      'Impersonate-Uid': '42',
      'Impersonate-Extra-scopes': ['a', 'b'],
    })
  })

  it('reads tokenFile (relative to the kubeconfig), again after invalidate, and says when it cannot', async () => {
    const file = kubeconfigFile(config({user: {tokenFile: 'token'}}), 'token-dir')
    writeFileSync(join(dir, 'token-dir', 'token'), 'from-file\n')
    const kc = loadKubeconfig({kubeconfig: file})
    const auth = requestAuth(kc)
    const options: https.RequestOptions = {}
    await auth.apply(options)
    expect((options.headers as Record<string, string>).Authorization).toBe('Bearer from-file')
    writeFileSync(join(dir, 'token-dir', 'token'), 'rotated')
    expect(auth.invalidate()).toBe(true)
    await auth.apply(options)
    expect((options.headers as Record<string, string>).Authorization).toBe('Bearer rotated')

    rmSync(join(dir, 'token-dir', 'token'))
    await expect(requestAuth(kc).apply({})).rejects.toThrow(`cannot read tokenFile ${join(dir, 'token-dir', 'token')}`)
  })

  it('puts CA, insecure-skip-tls-verify and tls-server-name onto the TLS options', async () => {
    const caFile = join(dir, 'ca-opt.pem')
    writeFileSync(caFile, 'CA FROM FILE')
    const fromFile = await applied(
      loadKubeconfig({kubeconfig: kubeconfigFile(config({cluster: {'certificate-authority': caFile, 'tls-server-name': 'kube.internal'}}))}),
    )
    expect(String(fromFile.ca)).toBe('CA FROM FILE')
    expect(fromFile.servername).toBe('kube.internal')
    expect(fromFile.rejectUnauthorized).toBeUndefined()
    const fromData = await applied(
      loadKubeconfig({
        kubeconfig: kubeconfigFile(
          config({cluster: {'certificate-authority': caFile, 'certificate-authority-data': Buffer.from('CA DATA').toString('base64')}}),
        ),
      }),
    )
    expect(String(fromData.ca)).toBe('CA DATA')
    const insecure = await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({cluster: {'insecure-skip-tls-verify': true}}))}))
    expect(insecure.rejectUnauthorized).toBe(false)
    await expect(
      requestAuth(loadKubeconfig({kubeconfig: kubeconfigFile(config({cluster: {'certificate-authority': join(dir, 'no-ca.pem')}}))})).apply({}),
    ).rejects.toThrow(`cannot read certificate-authority ${join(dir, 'no-ca.pem')}: ENOENT`)
  })

  it('refuses a CA together with insecure-skip-tls-verify, and a quoted "true", as kubectl does', () => {
    const both = kubeconfigFile(config({cluster: {'certificate-authority-data': 'Zm9v', 'insecure-skip-tls-verify': true}}))
    expect(() => loadKubeconfig({kubeconfig: both})).toThrow(
      `cannot read kubeconfig (--kubeconfig ${both}): clusters "dev": specifying a root certificates file with the insecure flag is not allowed (remove insecure-skip-tls-verify, or certificate-authority-data)`,
    )
    const caFile = kubeconfigFile(config({cluster: {'certificate-authority': 'ca.pem', 'insecure-skip-tls-verify': true}}))
    expect(() => loadKubeconfig({kubeconfig: caFile})).toThrow(
      'specifying a root certificates file with the insecure flag is not allowed (remove insecure-skip-tls-verify, or certificate-authority)',
    )
    const quoted = kubeconfigFile(config({cluster: {'insecure-skip-tls-verify': 'true'}}))
    expect(() => loadKubeconfig({kubeconfig: quoted})).toThrow(
      'clusters "dev": insecure-skip-tls-verify must be a boolean (true or false without quotes), got the string "true"',
    )
    // false with a CA is fine
    expect(
      loadKubeconfig({kubeconfig: kubeconfigFile(config({cluster: {'certificate-authority-data': 'Zm9v', 'insecure-skip-tls-verify': false}}))}).cluster
        ?.insecureSkipTlsVerify,
    ).toBe(false)
  })

  it('hands auth-provider users (oidc) to client-node', async () => {
    const payload = Buffer.from(JSON.stringify({exp: Math.floor(Date.now() / 1000) + 3600, sub: 'jane'})).toString('base64url')
    const idToken = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${payload}.sig`
    const kc = loadKubeconfig({
      kubeconfig: kubeconfigFile(
        config({user: {'auth-provider': {name: 'oidc', config: {'id-token': idToken, 'client-id': 'kubectl', 'idp-issuer-url': 'https://idp.invalid'}}}}),
      ),
    })
    expect(kc.user?.authProvider?.name).toBe('oidc')
    expect((await applied(kc)).headers.Authorization).toBe(`Bearer ${idToken}`)
  })
})

describe('exec credential plugins', () => {
  /** A plugin: prints an ExecCredential built by `status` (JS source of an object), counts its runs in `<name>.count`. */
  function plugin(name: string, status: string, extra = ''): {command: string; count: () => number; info: () => Record<string, unknown>} {
    const script = join(dir, `${name}.mjs`)
    const countFile = join(dir, `${name}.count`)
    const infoFile = join(dir, `${name}.info`)
    writeFileSync(
      script,
      `#!/usr/bin/env node
import {appendFileSync, writeFileSync} from 'node:fs'
appendFileSync(${JSON.stringify(countFile)}, 'x')
writeFileSync(${JSON.stringify(infoFile)}, JSON.stringify({info: JSON.parse(process.env.KUBERNETES_EXEC_INFO), argv: process.argv.slice(2), env: process.env.PLUGIN_ENV ?? null}))
${extra}
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO)
console.log(JSON.stringify({apiVersion: info.apiVersion, kind: 'ExecCredential', status: ${status}}))
`,
    )
    chmodSync(script, 0o755)
    return {
      command: script,
      count: () => {
        try {
          return readFileSync(countFile, 'utf8').length
        } catch {
          return 0
        }
      },
      info: () => JSON.parse(readFileSync(infoFile, 'utf8')) as Record<string, unknown>,
    }
  }

  function execUser(command: string, more: Record<string, unknown> = {}): Record<string, unknown> {
    return {exec: {apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never', command, ...more}}
  }

  it('runs the command with its args and env, sends status.token, and caches it without expiry', async () => {
    const p = plugin('simple', `{token: 'exec-token-' + process.argv[2]}`)
    const kc = loadKubeconfig({
      kubeconfig: kubeconfigFile(config({user: execUser(p.command, {args: ['one'], env: [{name: 'PLUGIN_ENV', value: 'set'}], provideClusterInfo: true})})),
    })
    expect((await applied(kc)).headers.Authorization).toBe('Bearer exec-token-one')
    expect((await applied(kc)).headers.Authorization).toBe('Bearer exec-token-one')
    expect(p.count()).toBe(1)
    const seen = p.info()
    expect(seen.argv).toEqual(['one'])
    expect(seen.env).toBe('set')
    expect(seen.info).toEqual({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      spec: {interactive: false, cluster: {server: 'https://127.0.0.1:6443'}},
    })
  })

  it('runs the plugin again once the credential expired, not before', async () => {
    const expired = plugin('expired', `{token: 'short', expirationTimestamp: new Date(Date.now() - 1000).toISOString()}`)
    const kcExpired = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(expired.command)}))})
    await applied(kcExpired)
    await applied(kcExpired)
    expect(expired.count()).toBe(2)

    const valid = plugin('valid', `{token: 'long', expirationTimestamp: new Date(Date.now() + 3600_000).toISOString()}`)
    const kcValid = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(valid.command)}))})
    // One run for concurrent requests too, and across connections of the same process.
    await Promise.all([applied(kcValid), applied(kcValid), applied(kcValid)])
    await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(valid.command)}))}))
    expect(valid.count()).toBe(1)
    // After a 401 the cached credential is dropped.
    const auth = requestAuth(kcValid)
    expect(auth.invalidate()).toBe(true)
    await auth.apply({})
    expect(valid.count()).toBe(2)
  })

  it('uses a client certificate and key from the plugin (PEM as printed)', async () => {
    const p = plugin('cert', `{clientCertificateData: 'CERT PEM', clientKeyData: 'KEY PEM'}`)
    const options = await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(p.command)}))}))
    expect([String(options.cert), String(options.key)]).toEqual(['CERT PEM', 'KEY PEM'])
    expect(options.headers.Authorization).toBeUndefined()
  })

  it('fails clearly, naming the command: exit code with stderr, not found with installHint, bad output', async () => {
    const failing = plugin('failing', `{}`, `console.error('token expired, run login'); process.exit(3)`)
    const kc = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(failing.command, {args: ['get-token']})}))})
    await expect(applied(kc)).rejects.toThrow(
      `exec credential plugin "${failing.command} get-token" of kubeconfig user "dev" exited with code 3: token expired, run login`,
    )
    // a failure is not cached
    await expect(applied(kc)).rejects.toThrow('exited with code 3')
    expect(failing.count()).toBe(2)

    const missing = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser('no-such-credential-plugin', {installHint: 'brew install it'})}))})
    const error = (await applied(missing).catch((e: unknown) => e)) as Error & {hint?: string}
    expect(error.message).toBe('exec credential plugin "no-such-credential-plugin" of kubeconfig user "dev" was not found (no-such-credential-plugin)')
    expect(error.hint).toBe('brew install it')

    const wrongVersion = plugin(
      'wrong-version',
      `{token: 'x'}`,
      `console.log(JSON.stringify({apiVersion: 'client.authentication.k8s.io/v1alpha1', kind: 'ExecCredential', status: {token: 'x'}})); process.exit(0)`,
    )
    await expect(applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(wrongVersion.command)}))}))).rejects.toThrow(
      'printed ExecCredential client.authentication.k8s.io/v1alpha1, expected ExecCredential client.authentication.k8s.io/v1',
    )
    const empty = plugin('empty', `{}`)
    await expect(applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(empty.command)}))}))).rejects.toThrow(
      'printed neither a token nor a client certificate and key',
    )
  })

  it('never echoes what a plugin printed when it is not JSON (it may hold the token), as kubectl', async () => {
    const leaky = plugin('leaky', `{}`, `process.stdout.write('token: s3cr3t-t0ken-value\\n'); process.exit(0)`)
    const error = (await applied(loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser(leaky.command)}))})).catch((e: unknown) => e)) as Error
    expect(error.message).toBe(
      `exec credential plugin "${leaky.command}" of kubeconfig user "dev" did not print an ExecCredential: decoding stdout: not valid JSON (26 bytes, not shown)`,
    )
    expect(JSON.stringify({message: error.message, cause: String(error.cause ?? '')})).not.toContain('s3cr3t')
  })

  it('looks a bare plugin name up on PATH like kubectl, refusing a match relative to the working directory', async () => {
    const p = plugin('on-path', `{token: 'from-path'}`)
    const pathDir = join(dir, 'path-bin')
    mkdirSync(pathDir, {recursive: true})
    writeFileSync(join(pathDir, 'ichor-test-plugin'), readFileSync(p.command))
    chmodSync(join(pathDir, 'ichor-test-plugin'), 0o755)
    const saved = process.env.PATH
    try {
      process.env.PATH = `${pathDir}${delimiter}${saved}`
      const kc = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser('ichor-test-plugin')}))})
      expect((await applied(kc)).headers.Authorization).toBe('Bearer from-path')
      // Only found through "." on PATH: Go's exec.ErrDot, kubectl refuses it.
      writeFileSync(join(pathDir, 'ichor-test-plugin-dot'), readFileSync(p.command))
      chmodSync(join(pathDir, 'ichor-test-plugin-dot'), 0o755)
      process.env.PATH = `.${delimiter}${saved}`
      const cwd = process.cwd()
      process.chdir(pathDir)
      try {
        const relative = loadKubeconfig({kubeconfig: kubeconfigFile(config({user: execUser('ichor-test-plugin-dot')}))})
        await expect(applied(relative)).rejects.toThrow(
          'cannot be run (found only as ichor-test-plugin-dot, relative to the working directory, which is refused)',
        )
      } finally {
        process.chdir(cwd)
      }
    } finally {
      process.env.PATH = saved
    }
  })

  it('checks the exec entry when loading: apiVersion, and interactiveMode required from v1 on', () => {
    const v1alpha1 = kubeconfigFile(config({user: {exec: {apiVersion: 'client.authentication.k8s.io/v1alpha1', command: 'x'}}}))
    expect(() => loadKubeconfig({kubeconfig: v1alpha1})).toThrow('exec apiVersion "client.authentication.k8s.io/v1alpha1" is not supported')
    const noMode = kubeconfigFile(config({user: {exec: {apiVersion: 'client.authentication.k8s.io/v1', command: 'x'}}}))
    expect(() => loadKubeconfig({kubeconfig: noMode})).toThrow('exec interactiveMode must be set for client.authentication.k8s.io/v1')
    const beta = kubeconfigFile(config({user: {exec: {apiVersion: 'client.authentication.k8s.io/v1beta1', command: 'x', env: null}}}))
    expect(loadKubeconfig({kubeconfig: beta}).user?.exec).toMatchObject({interactiveMode: 'IfAvailable', env: [], args: []})
  })
})

describe('TLS against a local HTTPS server (certificates from openssl)', () => {
  let server: https.Server
  let port: number
  let pki: string

  beforeAll(async () => {
    pki = join(dir, 'pki')
    mkdirSync(pki)
    const ssl = (...args: string[]) => execFileSync('openssl', args, {cwd: pki, stdio: 'pipe'})
    ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=test-ca')
    for (const [name, subject, ext] of [
      ['server', '/CN=kube.test', 'subjectAltName=DNS:kube.test'],
      ['client', '/CN=alice/O=devs', 'extendedKeyUsage=clientAuth'],
    ] as const) {
      ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject)
      writeFileSync(join(pki, `${name}.ext`), `${ext}\n`)
      ssl(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${name}.pem`,
        '-days',
        '1',
        '-extfile',
        `${name}.ext`,
      )
    }
    server = https.createServer(
      {
        key: readFileSync(join(pki, 'server.key')),
        cert: readFileSync(join(pki, 'server.pem')),
        ca: readFileSync(join(pki, 'ca.pem')),
        requestCert: true,
        rejectUnauthorized: false,
      },
      (req, res) => {
        const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate()
        res.end(JSON.stringify({cn: peer?.subject?.CN ?? null, authorization: req.headers.authorization ?? null}))
      },
    )
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as AddressInfo).port
  })
  afterAll(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())))

  async function get(kc: Kubeconfig): Promise<{cn: string | null; authorization: string | null}> {
    const options: https.RequestOptions = {}
    await requestAuth(kc).apply(options)
    return new Promise((resolve, reject) => {
      https
        .get(`https://127.0.0.1:${port}/`, options, (res) => {
          let body = ''
          res.on('data', (c: Buffer) => (body += c))
          res.on('end', () => resolve(JSON.parse(body)))
        })
        .on('error', reject)
    })
  }

  it('verifies the server with the CA and tls-server-name, and presents the client certificate', async () => {
    const file = kubeconfigFile(
      config({
        cluster: {server: `https://127.0.0.1:${port}`, 'certificate-authority': '../pki/ca.pem', 'tls-server-name': 'kube.test'},
        user: {'client-certificate': '../pki/client.pem', 'client-key-data': readFileSync(join(pki, 'client.key')).toString('base64')},
      }),
      'tls-config',
    )
    expect(await get(loadKubeconfig({kubeconfig: file}))).toEqual({cn: 'alice', authorization: null})
  })

  it('refuses a server whose name does not match, unless insecure-skip-tls-verify', async () => {
    const caData = readFileSync(join(pki, 'ca.pem')).toString('base64')
    const strict = kubeconfigFile(config({cluster: {server: `https://127.0.0.1:${port}`, 'certificate-authority-data': caData}}))
    await expect(get(loadKubeconfig({kubeconfig: strict}))).rejects.toThrow(/IP: 127\.0\.0\.1 is not in the cert's list/)
    const insecure = kubeconfigFile(config({cluster: {server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true}, user: {token: 'tok'}}))
    expect(await get(loadKubeconfig({kubeconfig: insecure}))).toEqual({cn: null, authorization: 'Bearer tok'})
  })
})
