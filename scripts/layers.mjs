// Counts the imports inside src/lib that run up the layers, and the circles between files
// (`node scripts/layers.mjs`). The layers, low to high, are those docs/architecture.md lists.
import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, dirname, resolve, relative} from 'node:path'

const root = resolve(process.argv[2] ?? '.', 'src/lib')
const order = [
  'constants',
  'errors',
  'log',
  'tasks',
  'fs',
  'exec',
  'yaml',
  'text',
  'chart',
  'values',
  'kube',
  'oci',
  'assets',
  'compatibility',
  'helm',
  'state',
  'session',
  'talos',
  'upgrade-path',
  'cilium',
  'stack',
  'kubernetes',
  'nodes',
  'credentials',
  'backup',
  'talos-upgrade',
  'upgrade-plan',
  'overview',
  'open',
  'doctor',
  'init',
  'plans',
  'cli',
]

const files = []
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) walk(path)
    else if (path.endsWith('.ts') && !path.endsWith('.d.ts')) files.push(path)
  }
}
walk(root)

const folderOf = (file) => {
  const parts = relative(root, file).split('/')
  return parts.length === 1 ? parts[0].replace(/\.ts$/, '') : parts[0]
}

const edges = new Map()
const upward = []
const unranked = new Set()
for (const file of files) {
  const deps = new Set()
  // Static imports and re-exports, and dynamic import() of a relative path.
  for (const m of readFileSync(file, 'utf8').matchAll(/(?:(?:import|export)\s+(type\s+)?[^'";]*?from\s+|import\()['"](\.[^'"]+)['"]/g)) {
    const target = resolve(dirname(file), m[2]).replace(/\.js$/, '.ts')
    deps.add(target)
    const [from, to] = [folderOf(file), folderOf(target)]
    if (from === to) continue
    for (const f of [from, to]) if (!order.includes(f)) unranked.add(f)
    if (order.indexOf(to) > order.indexOf(from)) upward.push(`${relative(root, file)} -> ${relative(root, target)}${m[1] ? ' (type)' : ''}`)
  }
  edges.set(
    file,
    [...deps].filter((d) => files.includes(d)),
  )
}

// Tarjan's strongly connected components: a component of more than one file is a circle.
let next = 0
const stack = []
const onStack = new Set()
const index = new Map()
const low = new Map()
const circles = []
const connect = (v) => {
  index.set(v, next)
  low.set(v, next++)
  stack.push(v)
  onStack.add(v)
  for (const w of edges.get(v) ?? []) {
    if (!index.has(w)) {
      connect(w)
      low.set(v, Math.min(low.get(v), low.get(w)))
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
  }
  if (low.get(v) !== index.get(v)) return
  const component = []
  let w
  do {
    w = stack.pop()
    onStack.delete(w)
    component.push(w)
  } while (w !== v)
  if (component.length > 1) circles.push(component)
}
for (const file of files) if (!index.has(file)) connect(file)

console.log(`upward imports: ${upward.length}`)
for (const line of upward) console.log(`  ${line}`)
console.log(`circles: ${circles.length}`)
for (const c of circles) console.log(`  ${c.map((f) => relative(root, f)).join(' <-> ')}`)
if (unranked.size > 0) console.log(`folders with no layer: ${[...unranked].join(' ')}`)
