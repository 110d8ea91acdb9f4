// The Talos node SIMULATOR's `apply-config` on a configured node (issue 22 point 5), as the
// real Talos does it: on v1.14 every change is applied without a reboot and talosctl has no
// `reboot` mode (siderolabs/talos 995bc30d5, in v1.14.0-rc.1 v1alpha1_server.go
// ApplyConfiguration and cmd/talosctl/pkg/talos/helpers/mode.go); below v1.14 a change outside
// the fields CanApplyImmediate lets through needs a reboot (v1.13.0 v1alpha1_runtime.go):
// `no-reboot` refuses it, `auto` reboots; `--dry-run` says which and prints the config diff.
// No API server: the nodes are configured but never bootstrapped.
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {SIMULATOR} from '../sim/simulated-nodes.js'
import {realTalosctlPath} from '../harness/talosctl.js'

const NEW = '127.0.0.12' // v1.14.1
const OLD = '127.0.0.13' // v1.13.0
let root: string
let env: NodeJS.ProcessEnv
const sim = (args: string[], extra: NodeJS.ProcessEnv = {}) => spawnSync(process.execPath, [SIMULATOR, ...args], {encoding: 'utf8', env: {...env, ...extra}})
const secure = (ip: string, dir: string) => ['--nodes', ip, '--endpoints', ip, '--talosconfig', join(dir, 'talosconfig')]
const running = (ip: string) => (JSON.parse(readFileSync(join(root, `node-${ip}.json`), 'utf8')) as {config: string}).config
const patched = (base: string, name: string, patch: string) => {
  const out = join(root, name)
  execFileSync(realTalosctlPath(), ['machineconfig', 'patch', base, '--patch', patch, '--output', out])
  return out
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ichor-sim-apply-'))
  writeFileSync(
    join(root, 'nodes.json'),
    JSON.stringify([
      {ip: NEW, role: 'worker', talosVersion: 'v1.14.1'},
      {ip: OLD, role: 'worker', talosVersion: 'v1.13.0'},
    ]),
  )
  env = {...process.env, TALOS_SIM_STATE: root, TALOS_SIM_REAL_TALOSCTL: realTalosctlPath(), TALOS_SIM_REBOOT_MS: '1500'}
  const talosctl = realTalosctlPath()
  execFileSync(talosctl, ['gen', 'secrets', '--output-file', join(root, 'secrets.yaml')], {stdio: 'ignore'})
  for (const [dir, version] of [
    ['new', 'v1.14.1'],
    ['old', 'v1.13.0'],
  ] as const) {
    execFileSync(
      talosctl,
      [
        'gen',
        'config',
        'c',
        'https://127.0.0.11:6443',
        '--with-secrets',
        join(root, 'secrets.yaml'),
        '--talos-version',
        version,
        '--output',
        join(root, dir),
        '--with-docs=false',
        '--with-examples=false',
      ],
      {stdio: 'ignore'},
    )
  }
  for (const [ip, dir] of [
    [NEW, 'new'],
    [OLD, 'old'],
  ] as const) {
    const r = sim(['apply-config', '--insecure', '--nodes', ip, '--endpoints', ip, '--file', join(root, dir, 'worker.yaml')])
    if (r.status !== 0) throw new Error(r.stderr)
  }
})
afterAll(() => rmSync(root, {recursive: true, force: true}))

describe('talosctl simulator: apply-config modes on a configured node', () => {
  it('Given Talos v1.14, When a changed config is applied with --dry-run, Then it says "without a reboot" with the diff and changes nothing; `--mode reboot` is not a talosctl v1.14 mode', () => {
    const before = running(NEW)
    const file = patched(join(root, 'new', 'worker.yaml'), 'new-env.yaml', '{"machine":{"env":{"GRPC_GO_LOG_SEVERITY_LEVEL":"error"}}}')
    const dry = sim(['apply-config', '--file', file, '--mode', 'auto', '--dry-run', ...secure(NEW, join(root, 'new'))])
    expect(dry.status, dry.stderr).toBe(0)
    expect(dry.stderr).toContain('Dry run summary:\nApplied configuration without a reboot (skipped in dry-run).\nConfig diff:\n')
    expect(dry.stderr).toMatch(/^\+\s+GRPC_GO_LOG_SEVERITY_LEVEL: error$/m)
    expect(running(NEW)).toBe(before)
    const reboot = sim(['apply-config', '--file', file, '--mode', 'reboot', ...secure(NEW, join(root, 'new'))])
    expect(reboot.status).not.toBe(0)
    expect(reboot.stderr).toContain('invalid argument "reboot" for "-m, --mode" flag: possible options are: auto, no-reboot, staged, try')
    const applied = sim(['apply-config', '--file', file, '--mode', 'no-reboot', ...secure(NEW, join(root, 'new'))])
    expect(applied.status, applied.stderr).toBe(0)
    expect(applied.stderr).toContain('Applied configuration without a reboot')
    expect(running(NEW)).toBe(readFileSync(file, 'utf8'))
  })

  it('Given Talos v1.13, When machine.env changes, Then no-reboot refuses it, the dry run says "with a reboot", and auto applies it and the node is away while it reboots', async () => {
    const base = join(root, 'old', 'worker.yaml')
    const image = patched(
      base,
      'old-image.yaml',
      '{"machine":{"install":{"image":"factory.talos.dev/installer/abc:v1.13.0"},"sysctls":{"vm.nr_hugepages":"64"}}}',
    )
    const dryImage = sim(['apply-config', '--file', image, '--dry-run', ...secure(OLD, join(root, 'old'))])
    expect(dryImage.status, dryImage.stderr).toBe(0)
    expect(dryImage.stderr).toContain('Applied configuration without a reboot (skipped in dry-run)')
    const env13 = patched(base, 'old-env.yaml', '{"machine":{"env":{"GRPC_GO_LOG_SEVERITY_LEVEL":"error"}}}')
    const refused = sim(['apply-config', '--file', env13, '--mode', 'no-reboot', ...secure(OLD, join(root, 'old'))])
    expect(refused.status).not.toBe(0)
    expect(refused.stderr).toContain("this config change can't be applied in immediate mode")
    const dry = sim(['apply-config', '--file', env13, '--mode', 'auto', '--dry-run', ...secure(OLD, join(root, 'old'))])
    expect(dry.status, dry.stderr).toBe(0)
    expect(dry.stderr).toContain('Dry run summary:\nApplied configuration with a reboot (skipped in dry-run).\nConfig diff:\n')
    const before = running(OLD)
    expect(before).not.toContain('GRPC_GO_LOG_SEVERITY_LEVEL')
    const applied = sim(['apply-config', '--file', env13, '--mode', 'auto', ...secure(OLD, join(root, 'old'))])
    expect(applied.status, applied.stderr).toBe(0)
    expect(applied.stderr).toContain('Applied configuration with a reboot')
    expect(running(OLD)).toBe(readFileSync(env13, 'utf8'))
    const away = sim(['version', ...secure(OLD, join(root, 'old'))])
    expect(away.stderr).toContain('connection refused')
    await new Promise((r) => setTimeout(r, 1_600))
    const back = sim(['version', ...secure(OLD, join(root, 'old'))])
    expect(back.status, back.stderr).toBe(0)
  })
})
