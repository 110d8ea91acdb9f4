// The local state folder on the operator's machine: private to its owner whatever existed
// before (issue 13 point 1), refused with exit 2 where it cannot be (issue 12 point 15),
// written atomically and checked when read (issue 12 point 13).
import {execFileSync, spawnSync} from 'node:child_process'
import {generateKeyPairSync, randomBytes} from 'node:crypto'
import {chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {parse as parseYaml, stringify} from 'yaml'
import {PrivatePathError} from '../../src/lib/fs/private-files.js'
import {
  commitStateFile,
  CorruptStateFileError,
  localState,
  prepareStateDir,
  readStateFile,
  requireStateFile,
  secureStateFiles,
  writeStateFile,
  type StateFile,
} from '../../src/lib/state/local.js'
import {NOBODY, nobodyCanList, nobodyCanRead, scriptResult, tsxCommand, withTmpfs} from '../support/other-user.js'
import {realTalosctlPath} from '../harness/talosctl.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const modeOf = (path: string) => statSync(path).mode & 0o7777

/** A folder nobody can walk into, so only the modes under it decide what nobody reads. */
function openRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'ichor-state-test-'))
  chmodSync(root, 0o755)
  return root
}

// --- small test-data factories: the shapes talosctl and Talos write ---------------------
const pem = (type: string, bytes = 120) =>
  `-----BEGIN ${type}-----\n${randomBytes(bytes).toString('base64').replace(/.{64}/g, '$&\n')}\n-----END ${type}-----\n`
const b64 = (text: string) => Buffer.from(text).toString('base64')
const token = () => `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`
const ecKey = () => generateKeyPairSync('ec', {namedCurve: 'P-256'}).privateKey.export({type: 'sec1', format: 'pem'}).toString()
const pair = () => ({crt: b64(pem('CERTIFICATE', 300)), key: b64(ecKey())})

/** A secrets bundle in the layout of `talosctl gen secrets` (siderolabs/talos pkg/machinery/config/generate/secrets). */
function secretsBundle(): string {
  return stringify(
    {
      cluster: {id: randomBytes(32).toString('base64url'), secret: randomBytes(32).toString('base64')},
      secrets: {bootstraptoken: token(), secretboxencryptionsecret: randomBytes(32).toString('base64')},
      trustdinfo: {token: token()},
      certs: {
        etcd: pair(),
        k8s: pair(),
        k8saggregator: pair(),
        k8sserviceaccount: {key: b64(ecKey())},
        os: {crt: b64(pem('CERTIFICATE', 200)), key: b64(pem('ED25519 PRIVATE KEY', 48))},
      },
    },
    {lineWidth: 0},
  )
}
function talosconfig(): string {
  return stringify(
    {
      context: 'homelab',
      contexts: {homelab: {endpoints: ['192.0.2.10'], ca: b64(pem('CERTIFICATE')), crt: b64(pem('CERTIFICATE')), key: b64(pem('ED25519 PRIVATE KEY', 48))}},
    },
    {lineWidth: 0},
  )
}
function kubeconfig(): string {
  return stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'admin@homelab',
      clusters: [{name: 'homelab', cluster: {server: 'https://192.0.2.10:6443', 'certificate-authority-data': b64(pem('CERTIFICATE'))}}],
      contexts: [{name: 'admin@homelab', context: {cluster: 'homelab', user: 'admin@homelab'}}],
      users: [{name: 'admin@homelab', user: {'client-certificate-data': b64(pem('CERTIFICATE')), 'client-key-data': b64(ecKey())}}],
    },
    {lineWidth: 0},
  )
}
const configsHash = () => `${randomBytes(32).toString('hex')}\n`
const VALID: Partial<Record<StateFile, () => string>> = {secrets: secretsBundle, talosconfig, kubeconfig, configsHash}

describe('local state folder: private whatever existed before (issue 13 point 1)', () => {
  it("Given a --state-dir that exists 0755 holding talosctl's 0644 files, When prepared, Then another user could read them before and cannot after", () => {
    const dir = join(openRoot(), 'state')
    mkdirSync(dir, {mode: 0o755})
    chmodSync(dir, 0o755)
    const state = localState('homelab', dir)
    const written = [state.controlPlaneConfig, state.workerConfig, state.talosconfig, state.secrets]
    for (const f of written) writeFileSync(f, 'machine: {}\n', {mode: 0o644})
    for (const f of written) expect(nobodyCanRead(f), f).toBe(true)

    const {fixed} = prepareStateDir(state)

    expect(modeOf(dir)).toBe(0o700)
    for (const f of written) expect(modeOf(f), f).toBe(0o600)
    for (const f of written) expect(nobodyCanRead(f), f).toBe(false)
    expect(nobodyCanList(dir)).toBe(false)
    expect(fixed).toContain(`${dir}: permissions 0755 → 0700`)
    expect(fixed).toContain(`${state.secrets}: permissions 0644 → 0600`)
    expect(fixed.at(-1)).toMatch(/other users of this machine could read .*secrets\.yaml.* until now/)
  })

  it('Given the real talosctl writing secrets and configs into a prepared --state-dir, Then its 0644 configs and talosconfig become 0600, and every file reads as ok', () => {
    const state = localState('homelab', join(openRoot(), 'state'))
    prepareStateDir(state)
    const talosctl = realTalosctlPath()
    execFileSync(talosctl, ['gen', 'secrets', '--output-file', state.secrets], {stdio: 'ignore'})
    execFileSync(
      talosctl,
      [
        'gen',
        'config',
        'homelab',
        'https://192.0.2.10:6443',
        '--with-secrets',
        state.secrets,
        '--output',
        state.dir,
        '--with-docs=false',
        '--with-examples=false',
      ],
      {stdio: 'ignore'},
    )
    expect(modeOf(state.controlPlaneConfig)).toBe(0o644) // what talosctl does
    const fixed = secureStateFiles(state)
    expect(fixed).toEqual([state.talosconfig, state.controlPlaneConfig, state.workerConfig].map((p) => `${p}: permissions 0644 → 0600`))
    for (const file of ['secrets', 'talosconfig', 'controlPlaneConfig', 'workerConfig'] as const) {
      expect(modeOf(state[file]), file).toBe(0o600)
      expect(readStateFile(state, file).status, file).toBe('ok')
    }
  })

  it('Given files talosctl writes 0644 after the folder was prepared, When secured, Then they are 0600 even to a user who could enter the folder', () => {
    const dir = join(openRoot(), 'state')
    const state = localState('homelab', dir)
    prepareStateDir(state)
    writeFileSync(state.controlPlaneConfig, 'x', {mode: 0o644})
    writeFileSync(state.kubeconfig, 'x', {mode: 0o644})
    chmodSync(dir, 0o755) // only to show the file modes on their own hold
    expect(nobodyCanRead(state.controlPlaneConfig)).toBe(true)
    expect(secureStateFiles(state)).toEqual([`${state.kubeconfig}: permissions 0644 → 0600`, `${state.controlPlaneConfig}: permissions 0644 → 0600`])
    expect(nobodyCanRead(state.controlPlaneConfig)).toBe(false)
    expect(nobodyCanRead(state.kubeconfig)).toBe(false)
    expect(secureStateFiles(state)).toEqual([])
  })

  it('refuses a folder anyone can write in (sticky /tmp-like or 0777) and a folder of another user, exit 2, changing nothing', () => {
    const root = openRoot()
    for (const mode of [0o1777, 0o777]) {
      const dir = join(root, `shared-${mode.toString(8)}`)
      mkdirSync(dir)
      chmodSync(dir, mode)
      const err = catchError(() => prepareStateDir(localState('c', dir)))
      expect(err).toBeInstanceOf(PrivatePathError)
      expect(err).toMatchObject({exitCode: 2})
      expect((err as Error).message).toMatch(new RegExp(`^--state-dir ${dir}: others can write in this folder`))
      expect(modeOf(dir)).toBe(mode)
    }
    const foreign = join(root, 'foreign')
    mkdirSync(foreign, {mode: 0o700})
    chownSync(foreign, NOBODY.uid, NOBODY.gid)
    expect(() => prepareStateDir(localState('c', foreign))).toThrow(/--state-dir .*foreign: is owned by uid 65534, not by this user/)
  })

  it('creates the XDG default folder 0700 with its missing parents', () => {
    const saved = process.env.XDG_STATE_HOME
    process.env.XDG_STATE_HOME = join(openRoot(), 'xdg', 'state')
    try {
      const state = localState('homelab')
      expect(state.fromFlag).toBe(false)
      expect(prepareStateDir(state)).toEqual({fixed: []})
      expect(modeOf(state.dir)).toBe(0o700)
      expect(modeOf(join(state.dir, '..'))).toBe(0o700)
    } finally {
      process.env.XDG_STATE_HOME = saved
    }
  })
})

describe('--state-dir where no folder can be (issue 12 point 15)', () => {
  it('Given a missing parent, Then a PrivatePathError naming --state-dir and the parent, exit 2, nothing created', () => {
    const parent = join(openRoot(), 'no-such')
    const err = catchError(() => prepareStateDir(localState('c', join(parent, 'state'))))
    expect(err).toBeInstanceOf(PrivatePathError)
    expect(err).toMatchObject({
      exitCode: 2,
      message: `--state-dir ${join(parent, 'state')}: its parent folder ${parent} does not exist; create it first or choose another folder`,
    })
    expect(existsSync(parent)).toBe(false)
  })

  it('Given a parent the operator cannot write (run as another user), Then exit 2 naming --state-dir', () => {
    const parent = openRoot() // root's 0755 folder: read-only for nobody
    const r = spawnSync(
      'setpriv',
      [`--reuid=${NOBODY.uid}`, `--regid=${NOBODY.gid}`, '--clear-groups', ...tsxCommand('state-file-script.ts', ['prepare', join(parent, 'state')])],
      {encoding: 'utf8', cwd: PROJECT_ROOT, env: {...process.env, HOME: parent}},
    )
    expect(scriptResult(r)).toEqual({
      ok: false,
      name: 'PrivatePathError',
      exitCode: 2,
      message: `--state-dir ${join(parent, 'state')}: cannot create the folder: permission denied (EACCES)`,
    })
  })

  it('Given a parent on a read-only file system, Then exit 2 naming --state-dir and why', () => {
    const mount = mkdtempSync(join(tmpdir(), 'ichor-ro-'))
    const r = withTmpfs(mount, 'ro,size=64k', tsxCommand('state-file-script.ts', ['prepare', join(mount, 'state')]))
    expect(scriptResult(r)).toEqual({
      ok: false,
      name: 'PrivatePathError',
      exitCode: 2,
      message: `--state-dir ${join(mount, 'state')}: cannot create the folder: the file system is read-only (EROFS)`,
    })
  })
})

describe('state files: atomic writes, corruption found on read (issue 12 point 13)', () => {
  let state: ReturnType<typeof localState>
  beforeEach(() => {
    state = localState('homelab', join(openRoot(), 'state'))
    prepareStateDir(state)
  })
  afterEach(() => {
    // no temp file is ever left beside the state files
    expect(readdirSync(state.dir).filter((n) => n.endsWith('.tmp'))).toEqual([])
  })

  it('reads back each valid file as ok and says absent for a missing one', () => {
    for (const [file, make] of Object.entries(VALID) as [StateFile, () => string][]) {
      expect(readStateFile(state, file), file).toMatchObject({status: 'absent'})
      const text = make()
      writeStateFile(state, file, text)
      expect(readStateFile(state, file), file).toEqual({status: 'ok', file, path: state[file], text})
      expect(modeOf(state[file])).toBe(0o600)
    }
  })

  it("accepts the bundle of the harness talosctl simulator's stand-in `gen secrets` (not PEM, still valid base64)", () => {
    execFileSync(process.execPath, [join(PROJECT_ROOT, 'test', 'sim', 'talosctl-simulator.mjs'), 'gen', 'secrets', '--output-file', state.secrets], {
      env: {...process.env, TALOS_SIM_REAL_TALOSCTL: ''},
    })
    expect(readStateFile(state, 'secrets')).toMatchObject({status: 'ok'})
  })

  // What a cut may lose and still read as ok: only the newline ending the last PEM block
  // (a quantum "Cg==" of base64), which leaves every key and certificate whole.
  const meaning = (text: string): unknown =>
    JSON.parse(JSON.stringify(parseYaml(text)), (_k, v: unknown) =>
      typeof v === 'string' && /^LS0t[A-Za-z0-9+/]*={0,2}$/.test(v) ? Buffer.from(v, 'base64').toString('utf8').trimEnd() : v,
    )

  it("Given a file cut short at any byte (a full disk), Then it reads as corrupt, never as ok with other content (the real talosctl's bundle too)", () => {
    const real = join(mkdtempSync(join(tmpdir(), 'ichor-real-secrets-')), 'secrets.yaml')
    execFileSync(realTalosctlPath(), ['gen', 'secrets', '--output-file', real], {stdio: 'ignore'})
    const cases = [...Object.entries(VALID), ['secrets', () => readFileSync(real, 'utf8')]] as [StateFile, () => string][]
    for (const [file, make] of cases) {
      const text = make()
      for (let cut = 0; cut < text.length - 1; cut += file === 'configsHash' ? 1 : 11) {
        writeFileSync(state[file], text.slice(0, cut))
        const read = readStateFile(state, file)
        if (read.status === 'ok') expect(meaning(read.text), `${file} cut at ${cut} of ${text.length}`).toEqual(meaning(text))
        else expect(read.status, `${file} cut at ${cut} of ${text.length}`).toBe('corrupt')
      }
    }
  })

  it('names the file and the field of the issue\'s "illegal base64" bundle, and requireStateFile throws with the repair', () => {
    const text = secretsBundle()
    const crt = text.indexOf('crt: ', text.indexOf('k8saggregator')) + 'crt: '.length
    writeFileSync(state.secrets, text.slice(0, crt + 81), {mode: 0o600}) // 81 base64 characters: not a whole quantum
    expect(readStateFile(state, 'secrets')).toMatchObject({
      status: 'corrupt',
      reason: expect.stringMatching(
        /^certs\.k8saggregator\.crt is not valid base64 \(cut short\?\); certs\.k8saggregator\.key is missing; .*certs\.os\.key is missing/,
      ),
    })
    const err = catchError(() => requireStateFile(state, 'secrets'))
    expect(err).toBeInstanceOf(CorruptStateFileError)
    expect((err as CorruptStateFileError).message).toMatch(new RegExp(`^${state.secrets} is corrupt \\(.*\\); it was not used$`))
    expect((err as CorruptStateFileError).hint).toMatch(/ichor-system\/ichor-talos/)
    expect(() => requireStateFile(state, 'kubeconfig')).toThrow(`${state.kubeconfig} is missing`)
  })

  it('refuses to write a corrupt copy (say, from the cluster) and keeps the file on disk', () => {
    const good = secretsBundle()
    writeStateFile(state, 'secrets', good)
    expect(() => writeStateFile(state, 'secrets', good.slice(0, 900))).toThrow(/secrets\.yaml is corrupt \(.*\); it was not written/)
    expect(() => writeStateFile(state, 'configsHash', '')).toThrow(/configs\.sha256 is corrupt \(the content is empty\)/)
    expect(readFileSync(state.secrets, 'utf8')).toBe(good)
  })

  it('commits a file talosctl wrote under a temp name only when it is whole: 0600 in place, or removed and reported', () => {
    const tmp = join(state.dir, '.secrets.yaml.talosctl')
    const text = secretsBundle()
    writeFileSync(tmp, text.slice(0, 1000), {mode: 0o644})
    expect(() => commitStateFile(state, 'secrets', tmp)).toThrow(new RegExp(`^${tmp} is corrupt \\(.*\\); it was removed$`))
    expect(existsSync(tmp)).toBe(false)
    expect(readStateFile(state, 'secrets').status).toBe('absent')
    writeFileSync(tmp, text, {mode: 0o644})
    commitStateFile(state, 'secrets', tmp)
    expect(readStateFile(state, 'secrets')).toMatchObject({status: 'ok', text})
    expect(modeOf(state.secrets)).toBe(0o600)
  })

  it('replaces a 0644 file by a 0600 one, whatever the umask', () => {
    writeFileSync(state.kubeconfig, 'old', {mode: 0o644})
    const umask = process.umask(0)
    try {
      writeStateFile(state, 'kubeconfig', kubeconfig())
    } finally {
      process.umask(umask)
    }
    expect(modeOf(state.kubeconfig)).toBe(0o600)
  })

  it('Given a disk too full for the new bundle, Then the write fails saying so and the previous bundle is intact', () => {
    const mount = mkdtempSync(join(tmpdir(), 'ichor-full-'))
    const r = withTmpfs(mount, 'size=64k', tsxCommand('state-file-script.ts', ['full-disk', join(mount, 'state')]), secretsBundle())
    const result = scriptResult<{ok: boolean; error?: {message: string}; status: string; unchanged: boolean}>(r)
    expect(result).toMatchObject({ok: true, status: 'ok', unchanged: true})
    expect(result.error?.message).toMatch(/^cannot write .*secrets\.yaml: the disk is full; the previous file, if any, is unchanged$/)
  })
})

function catchError(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected an error')
}
