// How Talos picks the disk it installs onto, from the node's Disk resources (`talosctl get disks`),
// so ichor can say which disk a config erases before any node is touched. Read from Talos v1.14.1:
// - pkg/machinery/resources/block/disk.go: the DiskSpec fields (dev_path, size, model, serial,
//   modalias, wwid, uuid, bus_path, transport, rotational, readonly, cdrom, symlinks: the
//   /dev/disk/by-* links udevd made for it, internal/.../controllers/block/disks.go and symlinks.go);
// - pkg/machinery/config/types/block/blockhelpers/blockhelpers.go MatchDisks: every Disk resource
//   (listed in ID order: cosi-project/runtime's inmem collection List sorts by ID, read in v1.16.2;
//   Talos v1.14.1 requires v1.16.3) is tested with `system_disk` false; the install takes the first match
//   (controllers/runtime/unattended_install.go, runtime/v1alpha1/v1alpha1_sequencer_tasks.go Install);
// - pkg/machinery/cel/celenv/celenv.go DiskLocator: `disk`, `system_disk`, glob(), the unit constants;
// - pkg/machinery/config/types/v1alpha1/v1alpha1_provider.go DiskMatchExpression: the legacy
//   machine.install.diskSelector turned into such an expression (v1alpha1_types.go: the size
//   condition), and v1alpha1_sequencer_tasks.go Install: machine.install.disk resolved with
//   filepath.EvalSymlinks, so a /dev/disk/by-* link names the disk it points to.

import {Environment, evaluate} from '@marcbachmann/cel-js'

/** A node's disk as `talosctl get disks -o yaml` reports it (absent fields: proto3's zero values). */
export interface DiskRecord {
  /** The resource ID (`sda`, `nvme0n1`): the order Talos lists and matches disks in. */
  id: string
  dev_path: string
  size: number
  model: string
  serial: string
  modalias: string
  wwid: string
  uuid: string
  bus_path: string
  sub_system: string
  transport: string
  rotational: boolean
  readonly: boolean
  cdrom: boolean
  symlinks: string[]
}

/** One `get disks` resource read into a DiskRecord; undefined when it is not one. */
export function diskRecordOf(resource: unknown): DiskRecord | undefined {
  const r = resource as {metadata?: {id?: unknown}; spec?: Record<string, unknown>} | null
  const spec = r?.spec
  if (!spec || typeof spec.dev_path !== 'string') return undefined
  const str = (k: string) => (typeof spec[k] === 'string' ? (spec[k] as string) : '')
  const bool = (k: string) => spec[k] === true
  return {
    id: typeof r?.metadata?.id === 'string' ? r.metadata.id : spec.dev_path.replace(/^\/dev\//, ''),
    dev_path: spec.dev_path,
    size: typeof spec.size === 'number' ? spec.size : 0,
    model: str('model'),
    serial: str('serial'),
    modalias: str('modalias'),
    wwid: str('wwid'),
    uuid: str('uuid'),
    bus_path: str('bus_path'),
    sub_system: str('sub_system'),
    transport: str('transport'),
    rotational: bool('rotational'),
    readonly: bool('readonly'),
    cdrom: bool('cdrom'),
    symlinks: Array.isArray(spec.symlinks) ? spec.symlinks.filter((s): s is string => typeof s === 'string') : [],
  }
}

/**
 * The CEL selector ichor has `gen config` write for an install disk on Talos v1.14+: gen config
 * writes `disk.dev_path == "X"`, which a /dev/disk/by-* link never equals (dev_path is /dev/<id>;
 * the links are the Disk resource's `symlinks`), so a link is matched among the symlinks.
 */
export function unattendedDiskMatch(disk: string): string {
  return disk.startsWith('/dev/disk/') ? `${JSON.stringify(disk)} in disk.symlinks` : `disk.dev_path == ${JSON.stringify(disk)}`
}

/** Talos's list order (resources sorted by ID). */
export function inTalosOrder(disks: DiskRecord[]): DiskRecord[] {
  return [...disks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** machine.install.disk: the disk itself or one of its /dev/disk/by-* links (EvalSymlinks). */
export function diskAtPath(disks: DiskRecord[], path: string): DiskRecord | undefined {
  return disks.find((d) => d.dev_path === path || d.symlinks.includes(path))
}

/** A selector ichor cannot evaluate (a CEL construct beyond what disk selectors use): Talos judges it on the node. */
export class UnsupportedSelector extends Error {}

/** A selector Talos itself refuses (the same words as Talos where it has them). */
export class InvalidSelector extends Error {}

// ---------- the legacy machine.install.diskSelector ----------

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  ki: 2 ** 10,
  kib: 2 ** 10,
  m: 1e6,
  mb: 1e6,
  mi: 2 ** 20,
  mib: 2 ** 20,
  g: 1e9,
  gb: 1e9,
  gi: 2 ** 30,
  gib: 2 ** 30,
  t: 1e12,
  tb: 1e12,
  ti: 2 ** 40,
  tib: 2 ** 40,
  p: 1e15,
  pb: 1e15,
  pi: 2 ** 50,
  pib: 2 ** 50,
  e: 1e18,
  eb: 1e18,
  ei: 2 ** 60,
  eib: 2 ** 60,
}

/** `[>=|<=|>|<|==]<size>[units]` as InstallDiskSizeMatcher reads it (sizes by go-humanize ParseBytes). */
export function parseSizeCondition(condition: string): {op: string; size: number} {
  const m = /^(>=|<=|>|<|==)?\s*(.*)$/.exec(condition.trim())!
  const text = m[2]!.trim()
  const digits = /^[\d.,]*/.exec(text)![0]
  const size = Number(digits.replace(/,/g, ''))
  const unit = SIZE_UNITS[text.slice(digits.length).trim().toLowerCase()]
  if (!digits || Number.isNaN(size) || unit === undefined) throw new InvalidSelector(`failed to parse disk size ${text}`)
  return {op: m[1] || '==', size: Math.floor(size * unit)}
}

const compare = (op: string, a: number, b: number) => (op === '>=' ? a >= b : op === '<=' ? a <= b : op === '>' ? a > b : op === '<' ? a < b : a === b)

/** go-glob's Glob (github.com/ryanuber/go-glob): `*` is the only wildcard. */
export function glob(pattern: string, subject: string): boolean {
  if (pattern === '') return subject === ''
  if (pattern === '*') return true
  const parts = pattern.split('*')
  if (parts.length === 1) return subject === pattern
  const end = parts.length - 1
  let rest = subject
  for (let i = 0; i < end; i++) {
    const idx = rest.indexOf(parts[i]!)
    if (i === 0 ? !pattern.startsWith('*') && idx !== 0 : idx < 0) return false
    rest = rest.slice(idx + parts[i]!.length)
  }
  return pattern.endsWith('*') || rest.endsWith(parts[end]!)
}

/** The legacy selector as a test of one disk (DiskMatchExpression's terms, in its order). */
export function legacySelectorTest(selector: Record<string, unknown>): (d: DiskRecord) => boolean {
  const s = (k: string) => (typeof selector[k] === 'string' ? (selector[k] as string) : '')
  if (s('name')) throw new InvalidSelector('selector on name is not supported')
  const size = selector.size === undefined || selector.size === null ? undefined : parseSizeCondition(String(selector.size))
  const type = s('type')
  if (type && !['nvme', 'sd', 'hdd', 'ssd'].includes(type)) throw new InvalidSelector(`unsupported disk type "${type}"`)
  const globs = (
    [
      ['uuid', 'uuid'],
      ['wwid', 'wwid'],
      ['model', 'model'],
      ['serial', 'serial'],
      ['modalias', 'modalias'],
      ['busPath', 'bus_path'],
    ] as const
  ).filter(([k]) => s(k))
  return (d) =>
    (!size || compare(size.op, d.size, size.size)) &&
    globs.every(([k, field]) => glob(s(k), d[field])) &&
    d.transport !== '' && // not a device-mapper device
    (type === 'nvme'
      ? d.transport === 'nvme'
      : type === 'sd'
        ? d.transport === 'mmc'
        : type === 'hdd'
          ? d.rotational
          : type === 'ssd'
            ? !d.rotational
            : true) &&
    !d.readonly &&
    !d.cdrom
}

// ---------- CEL, in the environment Talos gives disk selectors ----------

/** The unit constants of Talos's CEL environment (celenv.go), each a uint as there. */
const UNITS: Record<string, bigint> = {
  KiB: 2n ** 10n,
  MiB: 2n ** 20n,
  GiB: 2n ** 30n,
  TiB: 2n ** 40n,
  PiB: 2n ** 50n,
  EiB: 2n ** 60n,
  kB: 10n ** 3n,
  MB: 10n ** 6n,
  GB: 10n ** 9n,
  TB: 10n ** 12n,
  PB: 10n ** 15n,
  EB: 10n ** 18n,
}

/** A CEL uint: the library reads a JS bigint as int and exports no uint class, but a uint literal evaluates to one. */
const uint = (n: bigint | number): unknown => evaluate(`${BigInt(n)}u`)

/** The fields of Talos's DiskSpec a selector reads, typed as its proto declares them (size is uint64). */
const DISK_SCHEMA = {
  dev_path: 'string',
  size: 'uint',
  model: 'string',
  serial: 'string',
  modalias: 'string',
  wwid: 'string',
  uuid: 'string',
  bus_path: 'string',
  sub_system: 'string',
  transport: 'string',
  rotational: 'bool',
  readonly: 'bool',
  cdrom: 'bool',
  symlinks: 'list<string>',
} as const

/** Talos's DiskLocator environment (pkg/machinery/cel/celenv/celenv.go): `disk`, `system_disk`, glob() and the units. */
let environment: Environment | undefined
function diskEnvironment(): Environment {
  if (environment) return environment
  const env = new Environment()
    .registerVariable({name: 'disk', schema: DISK_SCHEMA})
    .registerVariable('system_disk', 'bool')
    .registerFunction('glob(string, string): bool', (pattern: string, subject: string) => glob(pattern, subject))
  for (const [name, value] of Object.entries(UNITS)) env.registerConstant(name, 'uint', uint(value))
  return (environment = env)
}

/**
 * Evaluates a disk selector (CEL) on one disk, with the types Talos declares (so `100 * GiB`
 * is an int times a uint, refused as cel-go refuses it); an expression the environment cannot
 * parse, type or evaluate is UnsupportedSelector: Talos judges it on the node.
 */
export function evalDiskSelector(expr: string, disk: DiskRecord): boolean {
  const fields = Object.fromEntries(Object.keys(DISK_SCHEMA).map((k) => [k, disk[k as keyof typeof DISK_SCHEMA]]))
  try {
    return diskEnvironment().evaluate(expr, {disk: {...fields, size: uint(disk.size)}, system_disk: false}) === true
  } catch (error) {
    throw new UnsupportedSelector((error as Error).message.split('\n')[0]!)
  }
}

// ---------- a node's install disk, judged against its disks ----------

export interface InstallChoice {
  /** The disk Talos installs onto (the first match in its order); undefined when none matches. */
  chosen?: DiskRecord
  /** Every disk the selector matches, in Talos's order. */
  matched: DiskRecord[]
  /** Set when ichor cannot evaluate the selector (Talos judges it on the node). */
  unsupported?: string
}

/** The disk a config's install disk or selector picks among the node's disks, as Talos picks it. */
export function chooseInstallDisk(target: {disk?: string; selector?: {cel: string} | {legacy: Record<string, unknown>}}, disks: DiskRecord[]): InstallChoice {
  const ordered = inTalosOrder(disks)
  if (!target.selector) {
    const found = target.disk === undefined ? undefined : diskAtPath(ordered, target.disk)
    return {chosen: found, matched: found ? [found] : []}
  }
  try {
    const test =
      'cel' in target.selector
        ? (
            (expr: string) => (d: DiskRecord) =>
              evalDiskSelector(expr, d)
          )(target.selector.cel)
        : legacySelectorTest(target.selector.legacy)
    const matched = ordered.filter(test)
    return {chosen: matched[0], matched}
  } catch (error) {
    if (error instanceof UnsupportedSelector) return {matched: [], unsupported: error.message}
    throw error
  }
}

/** A disk in a message: its path, size, transport and model, and its /dev/disk/by-id links. */
export function describeDisk(d: DiskRecord): string {
  const facts = [
    d.size ? `${d.size} bytes` : '',
    d.transport,
    d.model ? `model ${JSON.stringify(d.model)}` : '',
    ...d.symlinks.filter((l) => l.startsWith('/dev/disk/by-id/')),
  ]
  return `${d.dev_path} (${facts.filter(Boolean).join(', ')})`
}

/** How a selector reads in a message. */
export function describeSelector(selector: {cel: string} | {legacy: Record<string, unknown>}): string {
  return 'cel' in selector ? `the selector ${selector.cel}` : `machine.install.diskSelector ${JSON.stringify(selector.legacy)}`
}

/**
 * Why the node cannot install where its config says (undefined when it can, or when ichor cannot
 * evaluate the selector): the node, what the config names or selects, and the disks found.
 */
export function installDiskRefusal(
  target: {disk?: string; selector?: {cel: string} | {legacy: Record<string, unknown>}; from: string},
  node: string,
  disks: DiskRecord[],
): string | undefined {
  let choice: InstallChoice
  try {
    choice = chooseInstallDisk(target, disks)
  } catch (error) {
    if (error instanceof InvalidSelector) return `${describeSelector(target.selector!)} (from ${target.from}): Talos refuses it: ${error.message}`
    throw error
  }
  if (choice.chosen || choice.unsupported) return undefined
  const detailed = !target.disk || target.disk.startsWith('/dev/disk/')
  const found = disks.map((d) => (detailed ? describeDisk(d) : d.dev_path)) // as the node lists them
  const what = target.disk
    ? `${target.disk} (from ${target.from}) is not a disk of ${node}`
    : `${describeSelector(target.selector!)} (from ${target.from}) matches no disk of ${node}`
  return `${what}; its disks: ${found.join(', ') || '(none)'}`
}
