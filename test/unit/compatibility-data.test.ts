// The compatibility data as one file: the embedded copy checks out, the defaults lie inside every
// range it records (a bump that breaks one fails here), and `ichor assets fetch --from DIR` takes
// a newer revision, keeps an older one out and refuses one whose schema or sha256 is not what it claims.
import {copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {afterEach, describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {checkCompatibilityShape, compatibility, compatibilityDigest, parseCompatibilityFile, takeCompatibilityFrom} from '../../src/lib/compatibility/data.js'
import {kubernetesRangeOfTalos, knownCiliumCharts, minorKeyOf, newestKubernetesPatch, testedKubernetesOfCilium} from '../../src/lib/compatibility/queries.js'
import {compareVersions, DEFAULT_TALOS_VERSION, defaultKubernetesVersion, parseKubernetesVersion, SUPPORTED_TALOS} from '../../src/lib/talos/versions.js'
import {runCli} from '../support/run-cli.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const EMBEDDED = join(PROJECT_ROOT, 'assets', 'compatibility.json')
const rank = (minor: string) =>
  minor
    .split('.')
    .map(Number)
    .reduce((a, b) => a * 1000 + b)

describe('assets/compatibility.json', () => {
  it('checks out: its schema, and the sha256 it claims (after an edit: node scripts/compatibility-hash.mjs)', async () => {
    const file = parseCompatibilityFile(readFileSync(EMBEDDED, 'utf8'), 'assets/compatibility.json')
    expect(file.sha256).toBe(compatibilityDigest(file.data))
    // A run reads it without the JSON Schema check (it costs a compile at every start): it is made here.
    await expect(checkCompatibilityShape(file, 'assets/compatibility.json')).resolves.toBeUndefined()
  })

  it('the default Kubernetes runs on the default Talos and is inside the pinned Cilium chart’s tested range', () => {
    const k = parseKubernetesVersion(defaultKubernetesVersion())
    const talos = kubernetesRangeOfTalos(minorKeyOf(DEFAULT_TALOS_VERSION))!
    expect(compareVersions(k, parseKubernetesVersion(talos.min))).toBeGreaterThanOrEqual(0)
    expect(compareVersions(k, parseKubernetesVersion(talos.max))).toBeLessThanOrEqual(0)
    const cilium = testedKubernetesOfCilium(minorKeyOf(pinnedAssets().cilium.version))!
    expect(rank(`${k.major}.${k.minor}`)).toBeGreaterThanOrEqual(rank(cilium.oldest))
    expect(rank(`${k.major}.${k.minor}`)).toBeLessThanOrEqual(rank(cilium.newest))
    // The newest patch ichor knows of that minor, and no newer tested minor is left out.
    expect(defaultKubernetesVersion()).toBe(newestKubernetesPatch(`${k.major}.${k.minor}`))
    const next = `${k.major}.${k.minor + 1}`
    expect(rank(next) > rank(minorKeyOf(talos.max)) || rank(next) > rank(cilium.newest)).toBe(true)
  })

  it('the pinned Cilium chart is the newest chart ichor knows whose tested Kubernetes minors meet what the default Talos runs', () => {
    const talos = kubernetesRangeOfTalos(minorKeyOf(DEFAULT_TALOS_VERSION))!
    const meets = (version: string) => {
      const tested = testedKubernetesOfCilium(minorKeyOf(version))
      return tested !== undefined && rank(tested.oldest) <= rank(minorKeyOf(talos.max)) && rank(tested.newest) >= rank(minorKeyOf(talos.min))
    }
    const candidates = knownCiliumCharts()
      .map((c) => c.version)
      .filter(meets)
      .sort((a, b) => rank(b) - rank(a))
    expect(candidates[0]).toBe(pinnedAssets().cilium.version)
  })

  it('the pinned Cilium chart is a chart the data knows, with the same sha256 as the lock', () => {
    const pin = pinnedAssets().cilium
    expect(knownCiliumCharts().find((c) => c.version === pin.version)?.sha256).toBe(pin.sha256)
  })

  it('every supported Talos minor has a row, and every Kubernetes minor a Talos row names has a newest patch', () => {
    const data = compatibility()
    const newest = rank(SUPPORTED_TALOS.newestMinor.replace(/^v/, ''))
    for (let r = rank(SUPPORTED_TALOS.oldest.replace(/^v/, '').split('.').slice(0, 2).join('.')); r <= newest; r++) {
      const minor = `${Math.floor(r / 1000)}.${r % 1000}`
      const row = data.talos.minors[minor]
      expect(row, minor).toBeDefined()
      for (let k = rank(minorKeyOf(row!.kubernetes.min)); k <= rank(minorKeyOf(row!.kubernetes.max)); k++)
        expect(newestKubernetesPatch(`${Math.floor(k / 1000)}.${k % 1000}`), `Kubernetes 1.${k % 1000}`).toMatch(/^\d+\.\d+\.\d+$/)
    }
    for (const c of Object.values(data.cilium.minors)) expect(c.source).toMatch(/compatibility\.rst/)
  })
})

describe('a newer compatibility.json from a mirror (ichor assets fetch --from DIR)', () => {
  const saved = process.env.ICHOR_ASSETS_DIR
  afterEach(() => {
    if (saved === undefined) delete process.env.ICHOR_ASSETS_DIR
    else process.env.ICHOR_ASSETS_DIR = saved
  })
  const mirrorWith = (edit: (file: any) => void, rehash = true) => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-compat-mirror-'))
    const file = JSON.parse(readFileSync(EMBEDDED, 'utf8'))
    edit(file)
    if (rehash) file.sha256 = compatibilityDigest(file.data)
    writeFileSync(join(dir, 'compatibility.json'), JSON.stringify(file, null, 2))
    return dir
  }
  const newer = (file: any) => {
    file.revision += 1
    file.data.kubernetes.minors['1.37'].newestPatch = '1.37.4'
  }

  it('a newer revision is taken, and read instead of the embedded one', async () => {
    process.env.ICHOR_ASSETS_DIR = mkdtempSync(join(tmpdir(), 'ichor-assets-'))
    const taken = await takeCompatibilityFrom(mirrorWith(newer))
    expect(taken).toMatchObject({status: 'taken', path: join(process.env.ICHOR_ASSETS_DIR, 'compatibility.json')})
    expect(compatibility().origin).toBe(taken.path)
    expect(newestKubernetesPatch('1.37')).toBe('1.37.4')
  })

  it('the same or an older revision is not taken', async () => {
    process.env.ICHOR_ASSETS_DIR = mkdtempSync(join(tmpdir(), 'ichor-assets-'))
    expect((await takeCompatibilityFrom(mirrorWith(() => undefined))).status).toBe('not newer')
    expect(existsSync(join(process.env.ICHOR_ASSETS_DIR, 'compatibility.json'))).toBe(false)
    expect(compatibility().origin).toBe('embedded')
  })

  it.each([
    [
      'a sha256 that is not its data’s',
      (f: any) => (newer(f), (f.data.talos.minors['1.14'].newestPatch = 'v1.14.9')),
      false,
      /its data's sha256 is [0-9a-f]{64}, not the [0-9a-f]{64} it claims/,
    ],
    [
      'another schema',
      (f: any) => (newer(f), (f.schema = 'ichor.compatibility/v2')),
      true,
      /schema is "ichor.compatibility\/v2", this ichor reads ichor.compatibility\/v1/,
    ],
    [
      'a row without its source',
      (f: any) => (newer(f), delete f.data.cilium.minors['1.20'].source),
      true,
      /\/data\/cilium\/minors\/1\.20 must have required property 'source'/,
    ],
  ])('%s is refused (exit 2), naming the file, and nothing is stored', async (_name, edit, rehash, message) => {
    process.env.ICHOR_ASSETS_DIR = mkdtempSync(join(tmpdir(), 'ichor-assets-'))
    const mirror = mirrorWith(edit as (f: any) => void, rehash as boolean)
    const refused = await takeCompatibilityFrom(mirror).then(
      () => undefined,
      (e: unknown) => e as Error & {exitCode?: number},
    )
    expect(refused?.message).toMatch(message as RegExp)
    expect(refused?.exitCode).toBe(2)
    expect(refused?.message).toContain(join(mirror, 'compatibility.json'))
    expect(existsSync(join(process.env.ICHOR_ASSETS_DIR, 'compatibility.json'))).toBe(false)
  })

  it('the command: ichor assets fetch --from DIR takes the newer data with the artifacts, and says so', async () => {
    const assets = mkdtempSync(join(tmpdir(), 'ichor-assets-'))
    const mirror = mirrorWith(newer)
    const chart = pinnedAssets().cilium.file
    mkdirSync(join(mirror, dirname(chart)))
    copyFileSync(join(UPSTREAM.dir, chart), join(mirror, chart))
    const env = {...process.env, ICHOR_ASSETS_DIR: assets}
    const run = await runCli(['assets', 'fetch', '--from', mirror, '--only', 'cilium', '--json'], {env})
    expect(run.code, run.stderr).toBe(0)
    const result = JSON.parse(run.stdout) as {compatibility: {status: string; revision: number; path: string}}
    const embedded = JSON.parse(readFileSync(EMBEDDED, 'utf8')) as {revision: number}
    expect(result.compatibility).toMatchObject({status: 'taken', revision: embedded.revision + 1, path: join(assets, 'compatibility.json')})
    // Run again: the same revision is in use now, so it is not taken twice.
    const again = await runCli(['assets', 'fetch', '--from', mirror, '--only', 'cilium'], {env})
    expect(again.stdout).toContain(`compatibility data: ${join(mirror, 'compatibility.json')} is not newer than revision ${embedded.revision + 1} in use`)
  })
})
