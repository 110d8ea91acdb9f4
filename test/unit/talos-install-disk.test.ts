// The disk a node's final config installs onto (issue 38 point 5), and how Talos v1.14.1 picks it
// among the node's disks: UnattendedInstallConfig's CEL selector, v1alpha1's machine.install.disk
// (through /dev/disk/by-* links) and machine.install.diskSelector.
import {mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {chooseInstallDisk, diskRecordOf, evalDiskSelector, glob, installDiskRefusal, parseSizeCondition} from '../../src/lib/talos/disk-selector.js'
import {checkInitInputs, installDiskProblems} from '../../src/lib/init/inputs.js'
import {installDiskFor, NO_MACHINE_CONFIG_INPUTS} from '../../src/lib/talos/machine-config.js'
import {parseTalosVersion} from '../../src/lib/talos/versions.js'
import {genConfig, validateConfig} from '../../src/lib/talos/talosctl.js'
import type {MachineConfigInputs} from '../../src/lib/state/installation-types.js'
import {realTalosctlPath} from '../harness/talosctl.js'

const disk = (spec: Record<string, unknown>) => diskRecordOf({metadata: {id: String(spec.dev_path).slice(5)}, spec})!
const SDA = disk({
  dev_path: '/dev/sda',
  size: 480103981056,
  model: 'SAMSUNG MZ7LH480',
  serial: 'S45PNA0M',
  wwid: 'naa.5002538e',
  transport: 'sata',
  bus_path: '/pci0000:00/0000:00:17.0/ata1',
  symlinks: ['/dev/disk/by-id/ata-SAMSUNG_MZ7LH480_S45PNA0M', '/dev/disk/by-path/pci-0000:00:17.0-ata-1'],
})
const NVME = disk({
  dev_path: '/dev/nvme0n1',
  size: 1000204886016,
  model: 'Samsung SSD 980 PRO 1TB',
  serial: 'S5GXNF0R',
  transport: 'nvme',
  symlinks: ['/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GXNF0R'],
})
const HDD = disk({dev_path: '/dev/sdb', size: 4000787030016, model: 'WDC WD40', transport: 'sata', rotational: true})
const CDROM = disk({dev_path: '/dev/sr0', size: 0, transport: 'sata', cdrom: true, readonly: true})
const DISKS = [NVME, SDA, HDD, CDROM]

const patch = (yaml: string) => ({source: 'p.yaml', yaml})
const unattended = (match: string) => `apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: '${match}'\n`
const inputs = (m: Partial<MachineConfigInputs>): MachineConfigInputs => ({...NO_MACHINE_CONFIG_INPUTS, ...m})

describe('the install disk of the final config', () => {
  it('Given Talos v1.14 and --install-disk, Then the UnattendedInstallConfig gen config writes selects it by dev_path; a by-id link among the symlinks', () => {
    expect(installDiskFor(inputs({}), 'n', 'worker', 'v1.14.1')).toEqual({
      disk: '/dev/sda',
      selector: {cel: 'disk.dev_path == "/dev/sda"'},
      from: "Talos's default (--install-disk)",
    })
    const link = '/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GXNF0R'
    expect(installDiskFor(inputs({installDisk: link}), 'n', 'worker', 'v1.14.1')).toMatchObject({disk: link, selector: {cel: `"${link}" in disk.symlinks`}})
    const own = inputs({installDisk: '/dev/sda', nodePatches: [{node: 'n', source: 'n.yaml', yaml: unattended('disk.transport == "nvme"')}]})
    expect(installDiskFor(own, 'n', 'worker', 'v1.14.1')).toEqual({selector: {cel: 'disk.transport == "nvme"'}, from: '--node-patch n n.yaml'})
  })

  it('Given Talos v1.14 and a patch setting machine.install.disk, Then it is refused naming the patch (Talos refuses both documents), not taken as the disk', () => {
    const t = installDiskFor(inputs({patches: [patch('machine:\n  install:\n    disk: /dev/nvme0n1\n')]}), 'n', 'controlplane', 'v1.14.1')
    expect(t.disk).toBeUndefined()
    expect(t.problem).toMatch(
      /^--config-patch p\.yaml: machine\.install is not used with the UnattendedInstallConfig that talosctl gen config writes for Talos v1\.14\+/,
    )
  })

  it('Given init inputs with such a patch, Then init refuses it offline, once, naming the flag (before it asks to go ahead)', () => {
    const init = checkInitInputs(
      {
        clusterName: 'c',
        endpoint: 'https://192.0.2.10:6443',
        controlPlanes: ['192.0.2.10'],
        workers: ['192.0.2.11', '192.0.2.12'],
        machineConfig: {configPatchWorker: ['machine:\n  install:\n    disk: /dev/nvme0n1\n']},
      },
      {requireNodes: true},
    )
    expect(installDiskProblems(init)).toEqual([
      {path: '--config-patch-worker', message: expect.stringMatching(/^--config-patch-worker inline: machine\.install is not used/)},
    ])
    expect(installDiskProblems({...init, talosVersion: parseTalosVersion('v1.13.0')})).toEqual([])
  })

  it('Given the UnattendedInstallConfig deleted, Then machine.install decides, its diskSelector over its disk; with neither the config installs nowhere', () => {
    const del = 'apiVersion: v1alpha1\nkind: UnattendedInstallConfig\n$patch: delete\n'
    const legacy = installDiskFor(
      inputs({patches: [patch(`${del}---\nmachine:\n  install:\n    disk: /dev/sdb\n    diskSelector:\n      size: '>= 1TB'\n`)]}),
      'n',
      'worker',
      'v1.14.1',
    )
    expect(legacy).toEqual({selector: {legacy: {size: '>= 1TB'}}, from: '--config-patch p.yaml'})
    expect(installDiskFor(inputs({patches: [patch(del)]}), 'n', 'worker', 'v1.14.1').problem).toMatch(/installs Talos nowhere/)
  })

  it("Given Talos v1.13, Then machine.install.disk of gen config, or a patch's, decides; the node's own patch applies last", () => {
    expect(installDiskFor(inputs({installDisk: '/dev/nvme0n1'}), 'n', 'worker', 'v1.13.0')).toEqual({disk: '/dev/nvme0n1', from: '--install-disk'})
    const m = inputs({
      patches: [patch('machine:\n  install:\n    disk: /dev/sdb\n')],
      nodePatches: [{node: 'n', source: 'n.yaml', yaml: 'machine:\n  install:\n    disk: /dev/sdc\n'}],
    })
    expect(installDiskFor(m, 'n', 'worker', 'v1.13.0')).toEqual({disk: '/dev/sdc', from: '--node-patch n n.yaml'})
    expect(installDiskFor(m, 'other', 'worker', 'v1.13.0')).toEqual({disk: '/dev/sdb', from: '--config-patch p.yaml'})
  })
})

describe('a selector matched on the node, as Talos matches it', () => {
  it('Given CEL selectors, Then the first disk in ID order that matches is chosen', () => {
    const pick = (cel: string) => chooseInstallDisk({selector: {cel}}, DISKS)
    expect(pick('disk.transport == "nvme"').chosen).toBe(NVME)
    expect(pick('disk.size > 900u * GB && !disk.rotational').chosen).toBe(NVME)
    expect(pick('disk.size >= 4u * TB').chosen).toBe(HDD)
    expect(pick('glob("SAMSUNG*", disk.model)').chosen).toBe(SDA)
    expect(pick('"/dev/disk/by-path/pci-0000:00:17.0-ata-1" in disk.symlinks').chosen).toBe(SDA)
    expect(pick('disk.model.startsWith("Samsung") || disk.serial == "S45PNA0M"').matched).toEqual([NVME, SDA])
    expect(pick('disk.transport == "sata" && !disk.cdrom').matched.map((d) => d.dev_path)).toEqual(['/dev/sda', '/dev/sdb'])
    expect(pick('disk.transport == "mmc"').chosen).toBeUndefined()
    expect(pick('disk.whatever(1)').unsupported).toBeDefined()
    // Typed as Talos types it: an int times a uint constant is no overload in cel-go either.
    expect(pick('disk.size > 900 * GB').unsupported).toMatch(/no such overload/)
  })

  it('Given the legacy diskSelector, Then its terms, size conditions and globs; never a CD-ROM, read-only or transport-less disk', () => {
    const pick = (legacy: Record<string, unknown>) => chooseInstallDisk({selector: {legacy}}, DISKS).matched.map((d) => d.dev_path)
    expect(pick({size: '<= 500GB'})).toEqual(['/dev/sda'])
    expect(pick({size: '>1TB'})).toEqual(['/dev/nvme0n1', '/dev/sdb'])
    expect(pick({size: '>2TB'})).toEqual(['/dev/sdb'])
    expect(pick({size: '1000204886016'})).toEqual(['/dev/nvme0n1'])
    expect(pick({type: 'ssd'})).toEqual(['/dev/nvme0n1', '/dev/sda'])
    expect(pick({type: 'hdd'})).toEqual(['/dev/sdb'])
    expect(pick({type: 'nvme', model: 'Samsung*'})).toEqual(['/dev/nvme0n1'])
    expect(pick({busPath: '/pci0000:00/*'})).toEqual(['/dev/sda'])
    expect(pick({})).toEqual(['/dev/nvme0n1', '/dev/sda', '/dev/sdb'])
    expect(installDiskRefusal({selector: {legacy: {name: 'x'}}, from: 'p'}, 'n', DISKS)).toMatch(/Talos refuses it: selector on name is not supported/)
    expect(parseSizeCondition('>= 1.5 TiB')).toEqual({op: '>=', size: 1.5 * 2 ** 40})
    expect(() => parseSizeCondition('>= lots')).toThrow(/failed to parse disk size lots/)
  })

  it('Given a path, Then the disk itself or one of its /dev/disk/by-* links; otherwise refused naming the node and its disks', () => {
    expect(chooseInstallDisk({disk: '/dev/disk/by-id/ata-SAMSUNG_MZ7LH480_S45PNA0M'}, DISKS).chosen).toBe(SDA)
    expect(chooseInstallDisk({disk: '/dev/nvme0n1'}, DISKS).chosen).toBe(NVME)
    expect(installDiskRefusal({disk: '/dev/vdb', from: '--install-disk'}, 'n1', [SDA, NVME])).toBe(
      '/dev/vdb (from --install-disk) is not a disk of n1; its disks: /dev/sda, /dev/nvme0n1',
    )
    expect(installDiskRefusal({selector: {cel: 'disk.transport == "mmc"'}, from: 'p.yaml'}, 'n1', [SDA])).toBe(
      'the selector disk.transport == "mmc" (from p.yaml) matches no disk of n1; its disks: /dev/sda (480103981056 bytes, sata, model "SAMSUNG MZ7LH480", /dev/disk/by-id/ata-SAMSUNG_MZ7LH480_S45PNA0M)',
    )
  })

  it("Given go-glob's rules, Then * is the only wildcard", () => {
    expect(glob('a*c', 'abbc')).toBe(true)
    expect(glob('a*c', 'abbcd')).toBe(false)
    expect(glob('*', '')).toBe(true)
    expect(glob('sd[a-z]', 'sda')).toBe(false)
    expect(evalDiskSelector('glob("*980*", disk.model)', NVME)).toBe(true)
  })
})

describe('a /dev/disk/by-id install disk rendered by the real talosctl v1.14.1', () => {
  it('Given --install-disk naming a link, Then the UnattendedInstallConfig selects it among the symlinks, and Talos validates the config', async () => {
    process.env.ICHOR_TALOSCTL = realTalosctlPath()
    const dir = mkdtempSync(join(tmpdir(), 'ichor-byid-'))
    const link = '/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GXNF0R'
    const out = await genConfig({
      clusterName: 'c',
      endpoint: 'https://192.0.2.10:6443',
      secretsPath: '',
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.35.0',
      installDisk: link,
      outDir: dir,
    })
    await validateConfig(out.worker)
    expect(readFileSync(out.worker, 'utf8')).toContain(`match: '"${link}" in disk.symlinks'`)
    const t = installDiskFor(inputs({installDisk: link}), 'n', 'worker', 'v1.14.1')
    expect(chooseInstallDisk(t, DISKS).chosen).toBe(NVME)
  }, 120_000)
})
