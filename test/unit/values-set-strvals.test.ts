// Issue 37 item 3: --set and its siblings parse exactly as helm's strvals. Each row runs the real
// `helm template` (ICHOR_HELM, set by vitest.config.ts) on a chart that echoes its values and
// compares with what ichor makes of the same flags, ordered as a command orders them
// (valuesInputFrom). Helm's errors must be ichor's refusals (exit 2, the flag and its text named).
// A few rows are ichor's deliberate refusals where helm accepts: integers beyond 2^53, which
// JavaScript cannot hold, and prototype keys.
import {execFile} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {valuesInputFrom} from '../../src/lib/cli/values-args.js'
import {IchorError} from '../../src/lib/errors/errors.js'
import {newUserLayer} from '../../src/lib/values/layer.js'

const run = promisify(execFile)
const dir = mkdtempSync(join(tmpdir(), 'ichor-strvals-'))
const chart = join(dir, 'echo')
const file = (name: string, text: string) => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}
const F1 = file('one.txt', 'line 1,\nline 2 {x}\n')
const F2 = file('two.pem', '-----BEGIN X-----\nabc=\n')
const LIST_FILE = file('list.yaml', 'a: [p, q]\n')
const SCALAR_FILE = file('scalar.yaml', 'a: 1\n')
const deep = (n: number) => `${Array.from({length: n}, (_, i) => `k${i}`).join('.')}=1`

type Row =
  /** helm and ichor give the same values, or both refuse */
  | [string[]]
  /** helm accepts, ichor refuses on purpose: the message ichor gives, and what helm keeps in its JSON */
  | [string[], {ichorRefuses: RegExp; helmKeeps?: string}]

const ROWS: Row[] = [
  // typing: true/false/null in any case, int64 integers without a leading zero, the rest strings
  [['--set', 'a=true,b=True,c=FALSE,d=NULL,e=nUlL,f=falſe']],
  [['--set', 'a=yes,b=on,c=~,d=Null1']],
  [['--set', 'a=0,b=007,c=-007,d=+5,e=-0,f=+0']],
  [['--set', 'a=1.5,b=1e3,c=0x1f,d=1_000,e=-,f=+']],
  [['--set', 'a=9007199254740991,b=-9007199254740991']],
  [['--set', 'a=9223372036854775808,b=-9223372036854775809,c=99999999999999999999999']],
  [['--set', 'a="x",b=\'y\',c= x ,d=x y']],
  [['--set', 'a=']],
  [['--set', 'a=null']],
  [['--set', 'a.b=null,a.c=1']],
  // escapes and commas
  [['--set', 'a=x\\,y']],
  [['--set', 'a\\.b=1,c\\[0\\]=2,d\\=e=3']],
  [['--set', 'a=x\\\\y,b=x\\y']],
  [['--set', 'a=b\\']],
  [['--set', 'a\\']],
  [['--set', 'a=b=c,d=e.f[0]']],
  [['--set', 'a=1,b=2']],
  [['--set', 'a=1,']],
  [['--set', 'a=1,,b=2']],
  [['--set', 'a,b=1']],
  [['--set', 'a']],
  [['--set', '']],
  [['--set', 'a=x', '--set', 'a=y']],
  // nested keys
  [['--set', 'a.b.c=x']],
  [['--set', 'a.b=1,a.c=2']],
  [['--set', 'a=1,a.b=2']],
  [['--set', 'a.b=1,a=2']],
  [['--set', 'a.']],
  [['--set', 'a.b']],
  [['--set', 'a..b=1']],
  [['--set', '=x']],
  [['--set', '.a=1']],
  [['--set', deep(31)]],
  [['--set', deep(32)]],
  // lists
  [['--set', 'a={}']],
  [['--set', 'a={x,y}']],
  [['--set', 'a={1,true,NULL,x,007}']],
  [['--set', 'a={x\\,y,z\\}}']],
  [['--set', 'a={ x , y }']],
  [['--set', 'a={x},b=1']],
  [['--set', 'a={x}y']],
  [['--set', 'a={x']],
  [['--set', 'a=x{y}']],
  [['--set', 'a[0]=x']],
  [['--set', 'a[2]=x']],
  [['--set', 'a[0]=x,a[1]=y']],
  [['--set', 'a[1]=y,a[0]=x']],
  [['--set', 'a[0].b=1,a[0].c=2']],
  [['--set', 'a[1]=x,a[1].b=2']],
  [['--set', 'a[0][1]=x']],
  [['--set', 'a[0][0].b=1,a[0][1]=2']],
  [['--set', 'a[0]=']],
  [['--set', 'a[0]=,b=1']],
  [['--set', 'a[0]={x,y}']],
  [['--set', 'a[+1]=x,b[01]=y']],
  [['--set', 'a[-1]=x']],
  [['--set', 'a[x]=1']],
  [['--set', 'a[]=1']],
  [['--set', 'a[65536]=1']],
  [['--set', 'a[65537]=1']],
  [['--set', 'a[0']],
  [['--set', 'a[0]']],
  [['--set', 'a[0].']],
  [['--set', 'a[0]x=1']],
  [['--set', 'a[0],b=1']],
  [['--set', 'a=1,a[0]=2']],
  [['--set', 'a[0]=1,a.b=2']],
  [['--set', 'a[0]=1,a[0][0]=2']],
  [['--set', '[0]=x']],
  // --set-string: no typing, the same grammar
  [['--set-string', 'a=true,b=007,c=null,d=9223372036854775808,e=12']],
  [['--set-string', 'a={1,2},b[1]=3,c=']],
  [['--set-string', 'a=9007199254740993']],
  [['--set-string', 'a={x']],
  // --set-json: one JSON value per key, to its natural end
  [['--set-json', 'a=[1,"x",{"b":null}],b=true']],
  [['--set-json', 'a={"b":{"c":1.5}} b="x,y"']],
  [['--set-json', 'a=,b=2']],
  [['--set-json', 'a= 1 ,b=2']],
  [['--set-json', 'a[1]={"x":1},a[0]=0']],
  [['--set-json', 'a.b="\\u0041\\n"']],
  [['--set-json', 'a=1.5e3,b=1e-7,c=-0.5,d=1E2,e=-0.0']],
  [['--set-json', 'a=tru']],
  [['--set-json', 'a=01']],
  [['--set-json', 'a=1.']],
  [['--set-json', 'a=1e400']],
  [['--set-json', 'a=x']],
  [['--set-json', 'a={"b":1']],
  [['--set-json', 'a=[1,]']],
  [['--set-json', '{"a":{"b":1},"c":[1]}', '--set-json', '{"a":{"d":2}}']],
  [['--set-json', ' {"a":1} ']],
  [['--set-json', '{"a":1} x']],
  // --set-file: a file's content as a string; --set-literal: the rest as one string
  [['--set-file', `a=${F1}`]],
  [['--set-file', `a={${F1},${F2}},b[1]=${F2}`]],
  [['--set-file', `a=${join(dir, 'missing.txt')}`]],
  [['--set-literal', 'a.b=x,y\\z={}=']],
  [['--set-literal', 'a[1]=x,y,b.c[0].d=e']],
  [['--set-literal', 'a=']],
  [['--set-literal', 'a']],
  [['--set-literal', 'a[x]=1']],
  // helm's order whatever the order on the command line: -f, --set-json, --set, --set-string, --set-file, --set-literal
  [['--set', 'a=1,b=1', '--set-json', 'a=2,c=2']],
  [['--set-string', 'a=x', '--set', 'a=1']],
  [['--set-file', `a=${F1}`, '--set-string', 'a=x']],
  [['--set-literal', 'a=lit', '--set-file', `a=${F2}`]],
  [['--set', 'b.c=1', '--set-json', '{"b":{"d":2}}']],
  // the -f files are the base --set lands on
  [['-f', LIST_FILE, '--set', 'a[1]=x']],
  [['-f', SCALAR_FILE, '--set', 'a.b=2']],
  [['-f', SCALAR_FILE, '--set', 'a[0]=2']],
  [['-f', LIST_FILE, '--set-json', '{"a":{"b":1}}']],
  // ichor's own refusals: digits JavaScript would round, and prototype keys
  [
    ['--set', 'a=9007199254740993'],
    {ichorRefuses: /a: 9007199254740993 is an integer beyond .*pass --set-string a=9007199254740993\b/, helmKeeps: '"a":9007199254740993'},
  ],
  [['--set', 'a.b\\.c={1,-9223372036854775808}'], {ichorRefuses: /pass --set-string 'a\.b\\\.c\[1\]=-9223372036854775808'/, helmKeeps: '-9223372036854775808'}],
  [['--set-json', 'a=[9007199254740993]'], {ichorRefuses: /a: 9007199254740993 is an integer beyond .*quote it \("9007199254740993"\)/}],
  [['--set-json', 'a=1e21'], {ichorRefuses: /a: 1e\+21 is an integer beyond/, helmKeeps: '"a":1e+21'}],
  [['--set', '__proto__.x=1'], {ichorRefuses: /the key "__proto__" is not accepted/, helmKeeps: '"__proto__":{"x":1}'}],
]

interface Outcome {
  values?: unknown
  raw?: string
  error?: string
}

async function helm(args: string[]): Promise<Outcome> {
  try {
    const {stdout} = await run(process.env.ICHOR_HELM!, ['template', 'echo', chart, ...args], {encoding: 'utf8'})
    const raw = (parseYaml(stdout) as {data: {values: string}}).data.values
    return {values: JSON.parse(raw), raw}
  } catch (error) {
    return {error: String((error as {stderr?: string}).stderr ?? error).trim()}
  }
}

/** What an ichor values command makes of the same command line, through its own flag plumbing. */
function ichor(args: string[]): Outcome {
  const flags: Record<string, string[]> = {}
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i] === '-f' ? 'values' : args[i]!.slice(2)
    ;(flags[name] ??= []).push(args[i + 1]!)
  }
  try {
    const input = valuesInputFrom([], flags)
    if (input.kind !== 'edit') throw new Error('valuesInputFrom gave a whole layer')
    return {values: newUserLayer({}, {...input, replace: true})}
  } catch (error) {
    if (!(error instanceof IchorError)) throw error
    return {error: error.message, raw: String(error.exitCode)}
  }
}

/** Two helm processes at a time: the machine has two cores and other tests run beside. */
async function inPairs<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await work(items[i]!)
    }
  }
  await Promise.all([worker(), worker()])
  return out
}

let helmOutcomes: Outcome[] = []

beforeAll(async () => {
  mkdirSync(join(chart, 'templates'), {recursive: true})
  writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: echo\nversion: 0.1.0\n')
  writeFileSync(
    join(chart, 'templates', 'values.yaml'),
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: echo\ndata:\n  values: {{ toJson .Values | quote }}\n',
  )
  helmOutcomes = await inPairs(ROWS, ([args]) => helm(args))
})
afterAll(() => rmSync(dir, {recursive: true, force: true}))

describe("--set, --set-string, --set-json, --set-file and --set-literal parse as helm's strvals", () => {
  it('has a table of at least 60 command lines', () => {
    expect(ROWS.length).toBeGreaterThanOrEqual(60)
  })
  it.each(ROWS.map((row, i) => [row[0].join(' ').replaceAll(dir, '$DIR'), i] as const))('%s', (_name, i) => {
    const [args, deliberate] = ROWS[i]!
    const want = helmOutcomes[i]!
    const got = ichor(args)
    if (deliberate) {
      expect(want.error, 'helm accepts this row').toBeUndefined()
      if (deliberate.helmKeeps) expect(want.raw).toContain(deliberate.helmKeeps)
      expect(got.error).toMatch(deliberate.ichorRefuses)
      return
    }
    if (want.error !== undefined) {
      expect(got.error, `helm refuses: ${want.error}; ichor gave ${JSON.stringify(got.values)}`).toBeDefined()
      expect(got.raw, 'exit code').toBe('2')
      // The flag and its text, as typed.
      const named = args.some((a, j) => j % 2 === 1 && got.error!.startsWith(`${args[j - 1]} ${a}:`))
      expect(named, got.error).toBe(true)
      return
    }
    expect(got.error, 'helm accepts this row').toBeUndefined()
    expect(got.values).toEqual(want.values)
  })
})
