import {execa} from 'execa'
import {readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {gunzipSync} from 'node:zlib'
import {Parser, type ReadEntry} from 'tar'
import {describe, expect, it} from 'vitest'
import {untarSync} from '../../src/lib/chart/archive.js'
import {IchorError} from '../../src/lib/errors/errors.js'
import {buildBundle, buildTar, bundleTag, sha256Digest} from '../../src/lib/oci/bundle.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {FIXED_FILES} from './support/bundle-input.js'

interface TarEntry {
  path: string
  type: string
  mode?: number
  uid?: number
  gid?: number
  uname?: string
  gname?: string
  mtime?: number
  size: number
  pax: boolean
}

/** Lists the entries as the `tar` package reads them (an independent reader). */
function listWithTarPackage(layer: Buffer): TarEntry[] {
  const entries: TarEntry[] = []
  let failure: unknown
  const parser = new Parser({
    strict: true,
    onReadEntry(e: ReadEntry) {
      entries.push({
        path: e.path,
        type: e.type,
        mode: e.mode,
        uid: e.uid,
        gid: e.gid,
        uname: e.uname,
        gname: e.gname,
        mtime: e.mtime?.getTime(),
        size: e.size,
        pax: Boolean(e.extended || e.globalExtended),
      })
      e.resume()
    },
  })
  parser.on('error', (e: unknown) => {
    failure = e
  })
  parser.on('warn', (_c: string, m: string) => {
    failure ??= new Error(m)
  })
  parser.end(layer)
  if (failure) throw failure
  return entries
}

describe('buildBundle', () => {
  it('gives byte-identical layers for the same input, in any input order', () => {
    const a = buildBundle(FIXED_FILES)
    const b = buildBundle([...FIXED_FILES].reverse())
    expect(b.layer.equals(a.layer)).toBe(true)
    expect(a.layerDigest).toBe(sha256Digest(a.layer))
    expect(a.size).toBe(a.layer.length)
  })

  it('gives the same bytes in a second node process (npx tsx), whatever its time zone and locale', async () => {
    const script = fileURLToPath(new URL('./support/print-bundle.ts', import.meta.url))
    const {stdout} = await execa('npx', ['tsx', script], {
      cwd: PROJECT_ROOT,
      env: {TZ: 'Pacific/Kiritimati', LANG: 'tr_TR.UTF-8'},
      shell: false,
    })
    const child = JSON.parse(stdout) as {layer: string; layerDigest: string; size: number}
    const here = buildBundle(FIXED_FILES)
    expect(child.layerDigest).toBe(here.layerDigest)
    expect(Buffer.from(child.layer, 'base64').equals(here.layer)).toBe(true)
  })

  it('keeps the digests this project has always produced for fixed inputs (a zlib or format change would move every published digest)', () => {
    // If this fails after a Node upgrade or on a Node linked to another zlib, the deflate
    // stream changed: every bundle's manifest digest moves with it (see gzipDeterministic).
    // The real Kokumi manifest is large enough for zlib's block splitting to matter.
    expect(buildBundle([{path: 'manifest.yaml', content: readFileSync(UPSTREAM.kokumiManifest)}]).layerDigest).toBe(
      'sha256:b7231b56f10cfbeb08e32801954b848be43f54d982132174f86e99b93120e85e',
    )
    expect(buildBundle(FIXED_FILES).layerDigest).toBe('sha256:becdae795a8622558969f71d0436679811ba33a30f3eee9b646d44994be8daab')
  })

  it('writes a gzip header with no file name, mtime 0 and a fixed OS byte', () => {
    const {layer} = buildBundle(FIXED_FILES)
    expect([...layer.subarray(0, 3)]).toEqual([0x1f, 0x8b, 0x08])
    expect(layer[3]).toBe(0) // FLG: no FNAME, FCOMMENT, FEXTRA, FHCRC
    expect(layer.readUInt32LE(4)).toBe(0) // MTIME
    expect(layer[9]).toBe(0xff) // OS: unknown, not the build platform
  })

  it('is a tar the tar package reads with sorted entries, zero mtimes, owner 0:0 without names, mode 0644 and no pax headers', () => {
    const entries = listWithTarPackage(buildBundle(FIXED_FILES).layer)
    expect(entries.map((e) => `${e.type} ${e.path}`)).toEqual([
      'File a-first.yaml',
      'Directory crds/',
      'File crds/a.yaml',
      'File crds/z.yaml',
      'File manifest.yaml',
      'Directory notes/',
      'File notes/größe.txt',
    ])
    for (const e of entries) {
      expect(e.mtime, e.path).toBe(0)
      expect([e.uid, e.gid], e.path).toEqual([0, 0])
      expect(e.uname ?? '', e.path).toBe('')
      expect(e.gname ?? '', e.path).toBe('')
      expect(e.mode, e.path).toBe(e.type === 'Directory' ? 0o755 : 0o644)
      expect(e.pax, e.path).toBe(false)
    }
    expect(entries.find((e) => e.path === 'notes/größe.txt')?.size).toBe(Buffer.byteLength('ü\n'.repeat(300)))
  })

  it('holds exactly the given bytes (read back with the project untar)', () => {
    const files = untarSync(buildBundle(FIXED_FILES).layer, 'bundle')
    for (const f of FIXED_FILES) expect(files.get(f.path)?.equals(Buffer.from(f.content)), f.path).toBe(true)
    expect(files.size).toBe(FIXED_FILES.length)
  })

  it('uses only ustar file and folder headers (typeflag 0 or 5)', () => {
    const tar = gunzipSync(buildBundle(FIXED_FILES).layer)
    expect(tar.equals(buildTar(FIXED_FILES))).toBe(true)
    let offset = 0
    const flags: string[] = []
    while (offset < tar.length && tar[offset] !== 0) {
      flags.push(String.fromCharCode(tar[offset + 156]!))
      expect(tar.toString('ascii', offset + 257, offset + 263)).toBe('ustar\0')
      const size = parseInt(tar.toString('ascii', offset + 124, offset + 135), 8)
      offset += 512 + Math.ceil(size / 512) * 512
    }
    expect(flags.sort()).toEqual(['0', '0', '0', '0', '0', '5', '5'])
    expect(tar.length % 512).toBe(0)
  })

  it('is listed by the system tar with numeric owner 0/0 and the epoch as time', async () => {
    const {stdout} = await execa('tar', ['--numeric-owner', '-tvzf', '-'], {input: buildBundle(FIXED_FILES).layer, env: {TZ: 'UTC'}})
    const lines = stdout.trim().split('\n')
    expect(lines).toHaveLength(7)
    for (const line of lines) expect(line).toMatch(/^[-d]rw[-x]r-[-x]r-[-x] 0\/0 +\d+ 1970-01-01 00:00 /)
  })

  it('stores a path longer than 100 bytes through the ustar prefix field', () => {
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/file.yaml`
    const files = untarSync(buildBundle([{path: long, content: 'x'}]).layer, 'bundle')
    expect(files.get(long)?.toString()).toBe('x')
  })

  it.each([
    ['', /empty/],
    ['/etc/passwd', /relative/],
    ['a/../b', /\.\./],
    ['a//b', /empty/],
    ['a\\b', /separator/],
    [`${'x'.repeat(101)}`, /too long/],
  ])('refuses the path %j', (path, why) => {
    expect(() => buildBundle([{path, content: ''}])).toThrow(why)
  })

  it('refuses a path given twice, and a file that is also a folder', () => {
    expect(() =>
      buildBundle([
        {path: 'a', content: ''},
        {path: 'a', content: 'x'},
      ]),
    ).toThrow(/twice/)
    expect(() =>
      buildBundle([
        {path: 'a', content: ''},
        {path: 'a/b', content: ''},
      ]),
    ).toThrow(/also the folder/)
  })
})

describe('bundleTag', () => {
  it('is <chartVersion>-<first 12 hex of sha256 of the rendered bytes>', () => {
    expect(bundleTag('10.11.6', 'kind: X\n')).toBe(`10.11.6-${sha256Digest('kind: X\n').slice(7, 19)}`)
    expect(bundleTag('10.11.6', Buffer.from('kind: X\n'))).toBe(bundleTag('10.11.6', 'kind: X\n'))
  })

  it('moves when the rendered bytes move, with the same chart version', () => {
    expect(bundleTag('0.17.0', 'a')).not.toBe(bundleTag('0.17.0', 'b'))
  })

  it('keeps a leading v and turns semver build metadata (+) into _', () => {
    expect(bundleTag('v0.17.0', 'a')).toMatch(/^v0\.17\.0-[0-9a-f]{12}$/)
    expect(bundleTag('1.2.3+build.4', 'a')).toMatch(/^1\.2\.3_build\.4-[0-9a-f]{12}$/)
  })

  it('refuses a version that cannot make an OCI tag', () => {
    expect(() => bundleTag('1.0 beta', 'a')).toThrow(IchorError)
    expect(() => bundleTag('-1', 'a')).toThrow(/OCI tag/)
    expect(() => bundleTag('9'.repeat(120), 'a')).toThrow(/OCI tag/)
  })
})
