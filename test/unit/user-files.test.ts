// Charts and manifests given by flag are user input: a directory, a device, junk, a huge
// file or a gzip bomb is a named error with exit code 2, never a raw EISDIR/TAR_BAD_ARCHIVE.
import {spawnSync} from 'node:child_process'
import {closeSync, existsSync, mkdirSync, mkdtempSync, openSync, ftruncateSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'
import {describe, expect, it} from 'vitest'
import {resolveAsset} from '../../src/lib/assets/resolve.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {MAX_CHART_ARCHIVE_BYTES, MAX_CHART_UNPACKED_BYTES} from '../../src/lib/chart/archive.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const dir = mkdtempSync(join(tmpdir(), 'ichor-user-files-'))
function file(name: string, bytes: Buffer | string): string {
  const p = join(dir, name)
  writeFileSync(p, bytes)
  return p
}
function sparse(name: string, size: number): string {
  const p = join(dir, name)
  const fd = openSync(p, 'w')
  ftruncateSync(fd, size)
  closeSync(fd)
  return p
}
function exitCodeOf(fn: () => unknown): number | undefined {
  try {
    fn()
  } catch (error) {
    return (error as {exitCode?: number}).exitCode
  }
  return undefined
}

describe('--cilium-chart / --argocd-chart', () => {
  it('a directory is a named error, exit 2', () => {
    const d = join(dir, 'chart-dir')
    mkdirSync(d)
    expect(() => resolveAsset('cilium', {override: d})).toThrow(/--cilium-chart: .*chart-dir is a directory, expected a file/)
    expect(exitCodeOf(() => resolveAsset('cilium', {override: d}))).toBe(2)
  })
  it('a junk file is "not a gzip tarball", exit 2', () => {
    const junk = file('junk.tgz', 'this is not a chart\n')
    expect(() => resolveAsset('argocd', {override: junk})).toThrow(
      /--argocd-chart .*junk\.tgz is not a gzip tarball \(it does not start as a gzip stream does\)/,
    )
    expect(exitCodeOf(() => resolveAsset('argocd', {override: junk}))).toBe(2)
  })
  it('gzipped junk is "not a gzip tarball", exit 2', () => {
    const junk = file('junk2.tgz', gzipSync(Buffer.from('x'.repeat(4096))))
    expect(() => resolveAsset('cilium', {override: junk})).toThrow(/--cilium-chart .*junk2\.tgz is not a gzip tarball \(TAR_BAD_ARCHIVE/)
    expect(exitCodeOf(() => resolveAsset('cilium', {override: junk}))).toBe(2)
  })
  it('a tarball without Chart.yaml is not a chart, exit 2', () => {
    const empty = file('empty.tgz', buildBundle([{path: 'README.md', content: 'no chart here\n'}]).layer)
    expect(() => resolveAsset('cilium', {override: empty})).toThrow(/--cilium-chart .*empty\.tgz: not a Helm chart archive/)
    expect(exitCodeOf(() => resolveAsset('cilium', {override: empty}))).toBe(2)
  })
  it('a file over the size cap is refused before it is read', () => {
    const huge = sparse('huge.tgz', MAX_CHART_ARCHIVE_BYTES + 1)
    expect(() => resolveAsset('cilium', {override: huge})).toThrow(
      new RegExp(`--cilium-chart .*huge\\.tgz: is ${MAX_CHART_ARCHIVE_BYTES + 1} bytes; at most ${MAX_CHART_ARCHIVE_BYTES} bytes \\(16 MiB\\)`),
    )
  })
  it('a gzip bomb stops at the unpacked cap', () => {
    const bomb = file('bomb.tgz', gzipSync(Buffer.alloc(MAX_CHART_UNPACKED_BYTES + 1), {level: 1}))
    expect(() => resolveAsset('cilium', {override: bomb})).toThrow(/--cilium-chart .*bomb\.tgz: cannot unpack it: it unpacks to more than 128 MiB/)
  })
  it('a device is refused', () => {
    expect(() => resolveAsset('cilium', {override: '/dev/zero'})).toThrow(/--cilium-chart: \/dev\/zero is not a regular file/)
  })
  it('the real chart still resolves', () => {
    expect(resolveAsset('cilium', {override: UPSTREAM.ciliumChart}).version).toBe('1.18.0')
  })
})

describe('--kokumi-manifest', () => {
  it('a directory is a named error, exit 2', () => {
    expect(() => resolveAsset('kokumi', {override: UPSTREAM.kokumiCrdDir})).toThrow(/--kokumi-manifest: .*crd is a directory, expected a file/)
    expect(exitCodeOf(() => resolveAsset('kokumi', {override: UPSTREAM.kokumiCrdDir}))).toBe(2)
  })
  it('a file over the size cap is refused', () => {
    const huge = sparse('install.yaml', 8 * 1024 * 1024 + 1)
    expect(() => resolveAsset('kokumi', {override: huge})).toThrow(/--kokumi-manifest .*install\.yaml: is 8388609 bytes; at most 8388608 bytes \(8 MiB\)/)
  })
  it('a device is refused', () => {
    expect(() => resolveAsset('kokumi', {override: '/dev/zero'})).toThrow(/--kokumi-manifest: \/dev\/zero is not a regular file/)
  })
})

describe('the built CLI', () => {
  it('`cni values validate --cilium-chart DIR` exits 2 with the named error', () => {
    if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'cni', 'values', 'validate.js'))) throw new Error('dist/ is missing: run `npm run build` first')
    const r = spawnSync(process.execPath, [join(PROJECT_ROOT, 'bin', 'run.js'), 'cni', 'values', 'validate', '--cilium-chart', dir], {
      encoding: 'utf8',
      env: {...process.env, ICHOR_MIRROR: ''},
    })
    expect(r.stderr).toMatch(/--cilium-chart: .* is a directory, expected a file/)
    expect(r.stderr).not.toMatch(/EISDIR/)
    expect(r.status).toBe(2)
  })
})

describe('a chart whose values.yaml is an alias bomb', () => {
  it('is refused by name when its keys are read, not walked for ever', async () => {
    const {readChartArchive} = await import('../../src/lib/chart/archive.js')
    const {knownKeys} = await import('../../src/lib/values/known-keys.js')
    const letters = 'abcdefghij'
    let values = `a: &a {${Array.from({length: 9}, (_, i) => `k${i}: lol`).join(', ')}}\n`
    for (let i = 1; i < 10; i++) values += `${letters[i]}: &${letters[i]} {${Array.from({length: 9}, (_, j) => `k${j}: *${letters[i - 1]}`).join(', ')}}\n`
    const path = file(
      'bomb-chart.tgz',
      buildBundle([
        {path: 'cilium/Chart.yaml', content: 'apiVersion: v2\nname: cilium\nversion: 1.18.0\n'},
        {path: 'cilium/values.yaml', content: values},
      ]).layer,
    )
    const chart = readChartArchive(path, '--cilium-chart')
    expect(() => knownKeys(chart)).toThrow(/bomb-chart\.tgz: the chart's values\.yaml expands to more than 200000 values/)
    expect(exitCodeOf(() => knownKeys(chart))).toBe(2)
  })
})
