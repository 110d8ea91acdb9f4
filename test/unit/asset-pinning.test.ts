// A real run installs only the pinned artifacts unless --allow-unpinned; a dry run takes any.
// The real upstream files: the pinned Cilium chart is byte-exact in the mirror, Argo CD 10.1.1 and Kokumi
// 0.14.0 are older than the pins.
import {existsSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {installedArtifact, refuseUnpinnedArtifacts} from '../../src/lib/assets/pinning.js'
import {resolveAsset} from '../../src/lib/assets/resolve.js'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {runCli} from '../support/run-cli.js'
import {UPSTREAM} from '../support/upstream.js'

const assets = () => [
  resolveAsset('cilium', {override: UPSTREAM.pinnedCiliumChart}),
  resolveAsset('argocd', {override: UPSTREAM.argocdChart}),
  resolveAsset('kokumi', {mirror: UPSTREAM.dir, assetsDir: mkdtempSync(join(tmpdir(), 'ichor-no-assets-'))}),
]

describe('refuseUnpinnedArtifacts', () => {
  it('given artifacts that are not the pins, a real run is refused naming each one, its version and digest, the pin and --allow-unpinned', () => {
    const error = (() => {
      try {
        refuseUnpinnedArtifacts('ichor init', assets(), {dryRun: false, allowUnpinned: false})
      } catch (e) {
        return e
      }
    })() as ValidationError
    expect(error).toBeInstanceOf(ValidationError)
    expect(error.exitCode).toBe(2)
    const pins = pinnedAssets()
    // The pinned Cilium chart passes; the two older artifacts are named.
    expect(error.issues.map((i) => i.path)).toEqual(['--argocd-chart', 'kokumi'])
    const [argocd, kokumi] = error.issues
    expect(argocd!.message).toContain('argo-cd 10.1.1 (argo-cd-10.1.1.tgz, sha256 ')
    expect(argocd!.message).toContain(`is not the pinned argo-cd 10.11.6 (sha256 ${pins.argocd.sha256})`)
    expect(argocd!.message).toMatch(/sha256 [0-9a-f]{64}, from flag\)/)
    expect(argocd!.message).toContain('pass --allow-unpinned to install it anyway')
    expect(kokumi!.message).toContain('kokumi 0.14.0 (install.yaml, sha256 ')
    expect(kokumi!.message).toContain(`from mirror) is not the pinned kokumi 0.17.0 (sha256 ${pins.kokumi.sha256})`)
    expect(error.message).toMatch(/^ichor init: not the pinned artifacts, nothing was changed: 2 problems/)
  })

  it('--allow-unpinned or a dry run takes them', () => {
    expect(() => refuseUnpinnedArtifacts('ichor init', assets(), {dryRun: false, allowUnpinned: true})).not.toThrow()
    expect(() => refuseUnpinnedArtifacts('ichor init', assets(), {dryRun: true, allowUnpinned: false})).not.toThrow()
  })

  it('the pinned artifact alone passes a real run', () => {
    expect(() =>
      refuseUnpinnedArtifacts('ichor init', [resolveAsset('cilium', {override: UPSTREAM.pinnedCiliumChart})], {dryRun: false, allowUnpinned: false}),
    ).not.toThrow()
  })

  it('records the file name (not its folder), version, digest and whether it is pinned', () => {
    const [cilium, argocd] = assets()
    expect(installedArtifact(cilium!)).toEqual({
      file: basename(pinnedAssets().cilium.file),
      version: pinnedAssets().cilium.version,
      sha256: pinnedAssets().cilium.sha256,
      pinned: true,
    })
    expect(installedArtifact(argocd!)).toMatchObject({file: 'argo-cd-10.1.1.tgz', version: '10.1.1', pinned: false})
  })
})

describe('ichor init (real run) with artifacts that are not the pinned ones', () => {
  it('exits 2 before any step changes anything and names --allow-unpinned; the same flags with --dry-run pass that check', async () => {
    const work = mkdtempSync(join(tmpdir(), 'ichor-unpinned-'))
    const args = [
      'init',
      '--cluster-name',
      'homelab',
      '--endpoint',
      'https://192.0.2.10:6443',
      '--control-plane',
      '192.0.2.10',
      '--state-dir',
      join(work, 'state'),
      '--yes',
      '--cilium-chart',
      UPSTREAM.pinnedCiliumChart,
      '--argocd-chart',
      UPSTREAM.argocdChart,
      '--kokumi-manifest',
      UPSTREAM.kokumiManifest,
    ]
    // (a real init also needs the passphrase the Talos bundle is sealed with: given, so the pin check is what refuses)
    const passphrase = join(work, 'passphrase')
    writeFileSync(passphrase, 'unpinned test passphrase\n', {mode: 0o600})
    const env = {...process.env, ICHOR_MIRROR: '', ICHOR_STATE_PASSPHRASE_FILE: passphrase}
    const real = await runCli(args, {env})
    const said = `${real.stdout}${real.stderr}`
    expect(real.code, said).toBe(2)
    expect(said).toMatch(
      /--argocd-chart: Argo CD Helm chart .* argo-cd 10\.1\.1 \(argo-cd-10\.1\.1\.tgz, sha256 [0-9a-f]{64}, from flag\) is not the pinned argo-cd 10\.11\.6/,
    )
    expect(said).toMatch(/--kokumi-manifest: .*kokumi 0\.14\.0 .* is not the pinned kokumi 0\.17\.0/)
    expect(said).toContain('pass --allow-unpinned')
    expect(said).not.toMatch(/\n\s+at /)
    // Nothing was generated: the first step that writes (the Talos secrets) never ran.
    expect(existsSync(join(work, 'state', 'secrets.yaml'))).toBe(false)

    const dry = await runCli([...args, '--dry-run', '--output-dir', join(work, 'out')], {env})
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stderr).toMatch(/argocd: .*does NOT match the pin 10\.11\.6/)
  })
})
