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

// ---------- CEL, as far as disk selectors use it ----------

const UNITS: Record<string, number> = {
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
  PiB: 2 ** 50,
  EiB: 2 ** 60,
  kB: 1e3,
  MB: 1e6,
  GB: 1e9,
  TB: 1e12,
  PB: 1e15,
  EB: 1e18,
}

type Value = string | number | boolean | Value[] | DiskRecord | null
type Token = {t: 'str'; v: string} | {t: 'num'; v: number} | {t: 'id'; v: string} | {t: 'op'; v: string}

function tokenize(src: string): Token[] {
  const out: Token[] = []
  let i = 0
  while (i < src.length) {
    const c = src[i]!
    if (/\s/.test(c)) {
      i++
      continue
    }
    const raw = /^[rR]?("|')/.exec(src.slice(i))
    if (raw) {
      const q = raw[1]!
      const isRaw = raw[0].length === 2
      let j = i + raw[0].length
      let v = ''
      while (j < src.length && src[j] !== q) {
        if (src[j] === '\\' && !isRaw) {
          const e = src[j + 1]
          v += e === 'n' ? '\n' : e === 't' ? '\t' : (e ?? '')
          j += 2
        } else v += src[j++]
      }
      if (j >= src.length) throw new UnsupportedSelector('an unterminated string')
      out.push({t: 'str', v})
      i = j + 1
      continue
    }
    const num = /^(\d+(?:\.\d+)?)([uU])?/.exec(src.slice(i))
    if (num) {
      out.push({t: 'num', v: Number(num[1])})
      i += num[0].length
      continue
    }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))
    if (id) {
      out.push({t: 'id', v: id[0]})
      i += id[0].length
      continue
    }
    const op = /^(&&|\|\||==|!=|<=|>=|[<>!()[\],.*+\-/%])/.exec(src.slice(i))
    if (!op) throw new UnsupportedSelector(`the character ${JSON.stringify(c)}`)
    out.push({t: 'op', v: op[0]})
    i += op[0].length
  }
  return out
}

/**
 * Evaluates a disk selector (CEL) on one disk: literals, `disk.<field>`, `system_disk` (false),
 * the unit constants, ! && || == != < <= > >= in + - * / %, lists, glob(), and the string methods
 * startsWith, endsWith, contains, matches; anything else is UnsupportedSelector.
 */
export function evalDiskSelector(expr: string, disk: DiskRecord): boolean {
  const tokens = tokenize(expr)
  let pos = 0
  const peek = () => tokens[pos]
  const isOp = (v: string) => peek()?.t === 'op' && peek()!.v === v
  const expect = (v: string) => {
    if (!isOp(v)) throw new UnsupportedSelector(`expected "${v}"`)
    pos++
  }
  const or = (): Value => {
    let v = and()
    while (isOp('||')) {
      pos++
      const r = and()
      v = v === true || r === true
    }
    return v
  }
  const and = (): Value => {
    let v = relation()
    while (isOp('&&')) {
      pos++
      const r = relation()
      v = v === true && r === true
    }
    return v
  }
  const relation = (): Value => {
    const a = additive()
    const t = peek()
    if ((t?.t === 'op' && ['==', '!=', '<', '<=', '>', '>='].includes(t.v)) || (t?.t === 'id' && t.v === 'in')) {
      pos++
      const b = additive()
      if (t.v === 'in') {
        if (!Array.isArray(b)) throw new UnsupportedSelector('"in" on something other than a list')
        const list: Value[] = b
        return list.some((x) => x === a)
      }
      if (t.v === '==') return equal(a, b)
      if (t.v === '!=') return !equal(a, b)
      if (!((typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string')))
        throw new UnsupportedSelector(`"${t.v}" between these values`)
      return compare(t.v, a < b ? -1 : a > b ? 1 : 0, 0)
    }
    return a
  }
  const additive = (): Value => {
    let v = multiplicative()
    while (isOp('+') || isOp('-')) {
      const op = tokens[pos++]!.v
      const r = multiplicative()
      if (op === '+' && typeof v === 'string' && typeof r === 'string') v = v + r
      else v = op === '+' ? num(v) + num(r) : num(v) - num(r)
    }
    return v
  }
  const multiplicative = (): Value => {
    let v = unary()
    while (isOp('*') || isOp('/') || isOp('%')) {
      const op = tokens[pos++]!.v
      const r = unary()
      v = op === '*' ? num(v) * num(r) : op === '/' ? Math.trunc(num(v) / num(r)) : num(v) % num(r)
    }
    return v
  }
  const unary = (): Value => {
    if (isOp('!')) {
      pos++
      return unary() !== true
    }
    if (isOp('-')) {
      pos++
      return -num(unary())
    }
    return member()
  }
  const member = (): Value => {
    let v = primary()
    while (isOp('.')) {
      pos++
      const name = tokens[pos++]
      if (name?.t !== 'id') throw new UnsupportedSelector('a field name after "."')
      if (isOp('(')) {
        pos++
        const arg = or()
        expect(')')
        if (typeof v !== 'string' || typeof arg !== 'string') throw new UnsupportedSelector(`.${name.v}() on something other than a string`)
        if (name.v === 'startsWith') v = v.startsWith(arg)
        else if (name.v === 'endsWith') v = v.endsWith(arg)
        else if (name.v === 'contains') v = v.includes(arg)
        else if (name.v === 'matches') v = new RegExp(arg).test(v)
        else throw new UnsupportedSelector(`the method ${name.v}()`)
      } else if (v && typeof v === 'object' && !Array.isArray(v) && name.v in v && name.v !== 'id') v = (v as unknown as Record<string, Value>)[name.v]!
      else throw new UnsupportedSelector(`the field ${name.v}`)
    }
    return v
  }
  const primary = (): Value => {
    const t = tokens[pos++]
    if (!t) throw new UnsupportedSelector('an incomplete expression')
    if (t.t === 'str' || t.t === 'num') return t.v
    if (t.t === 'op' && t.v === '(') {
      const v = or()
      expect(')')
      return v
    }
    if (t.t === 'op' && t.v === '[') {
      const items: Value[] = []
      while (!isOp(']')) {
        items.push(or())
        if (!isOp(']')) expect(',')
      }
      pos++
      return items
    }
    if (t.t === 'id') {
      if (t.v === 'true' || t.v === 'false') return t.v === 'true'
      if (t.v === 'null') return null
      if (t.v === 'disk') return disk
      if (t.v === 'system_disk') return false
      if (t.v in UNITS) return UNITS[t.v]!
      if (t.v === 'glob' && isOp('(')) {
        pos++
        const pattern = or()
        expect(',')
        const subject = or()
        expect(')')
        if (typeof pattern !== 'string' || typeof subject !== 'string') throw new UnsupportedSelector('glob() on something other than strings')
        return glob(pattern, subject)
      }
      if (t.v === 'size' && isOp('(')) {
        pos++
        const v = or()
        expect(')')
        if (typeof v === 'string' || Array.isArray(v)) return v.length
      }
      throw new UnsupportedSelector(`"${t.v}"`)
    }
    throw new UnsupportedSelector(`"${t.v}"`)
  }
  const v = or()
  if (pos < tokens.length) throw new UnsupportedSelector(`what follows "${tokens[pos - 1]?.v ?? ''}"`)
  return v === true
}

function num(v: Value): number {
  if (typeof v !== 'number') throw new UnsupportedSelector('arithmetic on something other than numbers')
  return v
}

function equal(a: Value, b: Value): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]!))
  return a === b
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
