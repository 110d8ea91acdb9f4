#!/usr/bin/env node
// `npm run build:binary`: one executable for this platform (linux-x64 here) that runs
// without Node installed, built with Node's single executable applications (SEA): the
// built CLI (dist/) bundled by esbuild into one CommonJS file, Node's code cache, and as
// SEA assets the files ichor ships (assets/lock.json, policies, CRDs) plus the Cilium
// chart, Argo CD chart and Kokumi manifest, each checked against assets/lock.json here.
//
//   npm run build:binary                          artifacts from the fetched assets folder
//   npm run build:binary -- --from DIR            ...else from a local mirror
//   npm run build:binary -- --pinned-only         refuse any artifact that is not the pinned one
//   npm run build:binary -- --out FILE            default out/ichor
//
// A binary built from artifacts that are not the pinned ones says so (embeddedAssets(),
// printed by `ichor version`).
import {spawnSync} from 'node:child_process'
import {chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {tmpdir} from 'node:os'
import {basename, dirname, join, relative, resolve} from 'node:path'
import {fileURLToPath, pathToFileURL} from 'node:url'
import {parseArgs} from 'node:util'
import {build, formatMessages} from 'esbuild'
import {binarySummary, countWarnings} from './binary-summary.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const require = createRequire(import.meta.url)
// The fuse Node's SEA support looks for in the node binary (Node's documentation, "Single executable applications").
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'

// What the build says besides its summary (artifacts, timings, the tools' own output): kept
// for the log beside the binary, and shown in full only when the build fails.
const log = []
const say = (line) => log.push(line)

function fail(message, code = 2) {
  if (log.length > 0) process.stderr.write(`${log.join('\n')}\n`)
  console.error(`build-binary: ${message}`)
  process.exit(code)
}

let flags
try {
  flags = parseArgs({
    options: {
      from: {type: 'string'},
      'assets-dir': {type: 'string'},
      'pinned-only': {type: 'boolean', default: false},
      out: {type: 'string', default: join(root, 'out', 'ichor')},
    },
  }).values
} catch (error) {
  fail(`${error.message}; accepted: --from DIR, --assets-dir DIR, --pinned-only, --out FILE`)
}
if (flags.from && !(existsSync(flags.from) && statSync(flags.from).isDirectory())) fail(`--from: ${flags.from} is not a directory`)
if (!existsSync(join(root, 'dist', 'commands')) || !existsSync(join(root, 'oclif.manifest.json'))) {
  fail('dist/ or oclif.manifest.json is missing: run `npm run build` first (npm run build:binary does)')
}

// The built code decides what the pinned artifacts are and where they are found.
const dist = (p) => pathToFileURL(join(root, 'dist', 'lib', 'assets', p)).href
const {ASSET_IDS, pinnedAssets} = await import(dist('lock.js'))
const {describeAsset, resolveAsset} = await import(dist('resolve.js'))

// Scratch space of this build only (bundles, SEA config and blob), removed at the end
// unless ICHOR_SEA_KEEP is set: its ichor.cjs can then be profiled under plain node.
const work = mkdtempSync(join(tmpdir(), 'ichor-sea-'))
if (process.env.ICHOR_SEA_KEEP) console.error(`build-binary: ICHOR_SEA_KEEP: the bundles stay in ${work}`)
else process.on('exit', () => rmSync(work, {recursive: true, force: true}))

// --- the artifacts, verified against assets/lock.json -------------------------------
const seaAssets = {}
const embedded = []
for (const id of ASSET_IDS) {
  const pin = pinnedAssets()[id]
  let found
  try {
    found = resolveAsset(id, {assetsDir: flags['assets-dir'], mirror: flags.from})
  } catch (error) {
    fail(`${error.message}${flags.from ? '' : ' (offline: pass --from DIR with a local mirror)'}`)
  }
  const size = statSync(found.path).size
  const matchesPin = found.matchesPin && size === pin.size
  say(`build-binary: ${describeAsset(found)}`)
  if (!matchesPin && flags['pinned-only']) fail(`--pinned-only: ${found.path} is not the pinned ${pin.description} ${pin.version}`)
  const key = `artifacts/${id}/${basename(found.path)}`
  seaAssets[key] = found.path
  embedded.push({id, key, file: basename(found.path), version: found.version, sha256: found.sha256, size, matchesPin})
}
const index = join(work, 'embedded.json')
writeFileSync(index, `${JSON.stringify(embedded, null, 2)}\n`)
seaAssets['embedded.json'] = index

// --- the files ichor ships: everything under assets/ but the fetch targets ----------
function* shipped(dir) {
  for (const entry of readdirSync(dir, {withFileTypes: true})) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) yield* shipped(path)
    else if (entry.isFile() && !entry.name.startsWith('.')) yield path
  }
}
const assetsRoot = join(root, 'assets')
const gitIgnored = /^(charts\/.*\.tgz|kokumi\/.*\.yaml)$/
for (const file of shipped(assetsRoot)) {
  const rel = relative(assetsRoot, file).split('\\').join('/')
  if (!gitIgnored.test(rel)) seaAssets[`assets/${rel}`] = file
}

// --- one CommonJS bundle ----------------------------------------------------------
const pjson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const manifest = JSON.parse(readFileSync(join(root, 'oclif.manifest.json'), 'utf8'))
if (pjson.oclif.hooks) {
  // oclif loads a hook from its file; a binary has none (see build/sea-entry.cjs).
  fail(`oclif hooks in package.json cannot be in the binary: ${JSON.stringify(pjson.oclif.hooks)}`)
}
const runtimePjson = {
  name: pjson.name,
  version: pjson.version,
  description: pjson.description,
  type: 'commonjs',
  oclif: {...pjson.oclif, plugins: undefined, hooks: undefined},
}
// The oclif plugins package.json names (help, autocomplete), bundled as the root plugin is:
// their package.json's oclif section and manifest, their commands in the commands bundle.
/** The folder of the package `name` that `file` belongs to (its package.json is not in its exports). */
function packageRoot(file, name) {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    const pj = join(dir, 'package.json')
    if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).name === name) return dir
  }
  fail(`no package.json of ${name} above ${file}`)
}
const plugins = (pjson.oclif.plugins ?? []).map((name) => {
  const pluginRoot = packageRoot(require.resolve(name), name)
  const p = JSON.parse(readFileSync(join(pluginRoot, 'package.json'), 'utf8'))
  const m = JSON.parse(readFileSync(join(pluginRoot, 'oclif.manifest.json'), 'utf8'))
  if (p.oclif?.hooks && Object.keys(p.oclif.hooks).some((event) => !/^plugins:/.test(event))) {
    // Only plugin install/uninstall hooks (autocomplete's) may be left out: a binary installs no plugins.
    fail(`${name}: its hooks ${JSON.stringify(p.oclif.hooks)} cannot be in the binary`)
  }
  return {root: pluginRoot, pjson: {name: p.name, version: p.version, type: 'commonjs', oclif: {commands: p.oclif?.commands}}, manifest: m}
})
const commandSources = [{name: pjson.name, root, manifest}, ...plugins.map((p) => ({name: p.pjson.name, root: p.root, manifest: p.manifest}))]
// Each command is a loader: esbuild wraps a module reached by require() in a lazy
// initialiser, so running one command evaluates only that command's modules, not all of them.
const commandMap = commandSources.map(({name, root: from, manifest: m}) => {
  const entries = Object.entries(m.commands).map(([id, c]) => `${JSON.stringify(id)}: () => require(${JSON.stringify(join(from, ...c.relativePath))}).default`)
  return `${JSON.stringify(name)}: {${entries.join(', ')}}`
})
const lazyExport = (name, file) =>
  `export function ${name}(...args) { return require(${JSON.stringify(join(root, 'dist', 'lib', 'cli', file))}).${name}(...args) }`
// Per plugin name: command id -> loader of the command class; and the entry point's error handling and completion step.
const commandExports = [
  `export const commands = {${commandMap.join(', ')}}`,
  lazyExport('handleTopLevelError', 'top-level.js'),
  lazyExport('topicFlagError', 'top-level.js'),
].join('\n')
const bundledPlugins = plugins.map(({pjson: p, manifest: m}) => ({pjson: p, manifest: m}))
/** The two generated modules: package.json + manifest for the main script, and the command map. */
const virtualModules = {
  name: 'ichor-virtual',
  setup(b) {
    b.onResolve({filter: /^ichor:(bundle|commands)$/}, (a) => ({path: a.path, namespace: 'ichor'}))
    b.onLoad({filter: /.*/, namespace: 'ichor'}, (a) => ({
      resolveDir: root,
      loader: 'js',
      contents:
        a.path === 'ichor:bundle'
          ? `module.exports = {pjson: ${JSON.stringify(runtimePjson)}, manifest: ${JSON.stringify(manifest)}, plugins: ${JSON.stringify(bundledPlugins)}}`
          : commandExports,
    }))
  },
}
// Code the binary never runs: oclif loads TypeScript only to run a plugin from its
// sources (development); the rest are optional add-ons their users try and do without.
const neverLoaded = {
  name: 'never-loaded',
  setup(b) {
    b.onResolve({filter: /^(typescript|ts-node|bufferutil|utf-8-validate|source-map-support|encoding)$/}, (a) => ({path: a.path, namespace: 'never-loaded'}))
    b.onLoad({filter: /.*/, namespace: 'never-loaded'}, (a) => ({
      contents: `throw new Error(${JSON.stringify(`${a.path} is not in the ichor binary`)})`,
      loader: 'js',
    }))
  },
}
// The main script runs once at build time to make the startup snapshot (build/sea-entry.cjs).
// These modules read the terminal, environment or argv when they load, so they load at run
// time instead: each is replaced by build/deferred.cjs's stand-in, which fails the build if
// the snapshot touches it.
const DEFERRED = [
  /\/node_modules\/(ansis|supports-color|clean-stack|ansi-escapes)\/index\.js$/, // colour level, --no-color, home folder, TERM_PROGRAM
  /\/node_modules\/@oclif\/core\/lib\/(screen|ux\/index|command)\.js$/, // terminal width, spinner or not, stdout's EPIPE listener
]
const deferAtStart = {
  name: 'defer-at-start',
  setup(b) {
    b.onResolve({filter: /.*/}, async (a) => {
      if (a.kind !== 'require-call' || a.pluginData?.real || a.namespace !== 'file') return undefined
      const r = await b.resolve(a.path, {kind: a.kind, importer: a.importer, resolveDir: a.resolveDir, pluginData: {real: true}})
      if (r.errors.length > 0 || !DEFERRED.some((re) => re.test(r.path.split('\\').join('/')))) return undefined
      return {path: r.path, namespace: 'deferred'}
    })
    b.onLoad({filter: /.*/, namespace: 'deferred'}, (a) => {
      const esModule = /Object\.defineProperty\(exports, "__esModule"/.test(readFileSync(a.path, 'utf8'))
      const name = relative(root, a.path)
        .split('\\')
        .join('/')
        .replace(/^.*node_modules\//, '')
      return {
        resolveDir: root,
        loader: 'js',
        contents: `module.exports = require(${JSON.stringify(join(root, 'build', 'deferred.cjs'))})(() => require(${JSON.stringify(a.path)}), ${JSON.stringify(name)}, ${esModule})`,
        pluginData: {real: true},
      }
    })
  },
}
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  minify: true,
  keepNames: true,
  legalComments: 'none',
  logLevel: 'silent', // its warnings go to the log (below)
  metafile: true,
  plugins: [virtualModules, neverLoaded],
  // ESM code reads import.meta.url; in a CommonJS bundle it is the executable's URL. oclif's
  // engine check reads its package.json from disk, which a binary does not have.
  define: {'import.meta.url': '__ichorImportMetaUrl', 'process.env.OCLIF_DISABLE_ENGINE_WARNING': '"1"'},
}
const main = join(work, 'ichor.cjs')
const commandsBundle = join(work, 'commands.cjs')
const started = Date.now()
const built = await Promise.all([
  build({...common, entryPoints: [join(root, 'build', 'sea-entry.cjs')], outfile: main, plugins: [deferAtStart, ...common.plugins]}),
  // The commands share the main script's oclif (see build/sea-entry.cjs). They are compiled
  // at run time, so their import.meta.url can be the executable's.
  build({
    ...common,
    entryPoints: ['ichor:commands'],
    outfile: commandsBundle,
    external: ['@oclif/core'],
    banner: {js: 'var __ichorImportMetaUrl = require("node:url").pathToFileURL(process.execPath).href;'},
  }),
])
if (process.env.ICHOR_SEA_METAFILE) writeFileSync(process.env.ICHOR_SEA_METAFILE, JSON.stringify(built.map((r) => r.metafile)))
const bundlerWarnings = built.flatMap((r) => r.warnings)
if (bundlerWarnings.length > 0) say((await formatMessages(bundlerWarnings, {kind: 'warning', color: false})).join('').trimEnd())
seaAssets['commands.cjs'] = commandsBundle
// The V8 code cache of the commands bundle, made by this node (the one the binary is a copy of).
const codeCache = join(work, 'commands.cache')
const cached = spawnSync(process.execPath, [join(root, 'build', 'code-cache.cjs'), commandsBundle, codeCache], {
  stdio: ['ignore', 'pipe', 'pipe'],
  cwd: root,
  env: {...process.env, NODE_OPTIONS: ''},
  encoding: 'utf8',
})
if (cached.status !== 0)
  fail(`the code cache of the commands bundle could not be made (${cached.status ?? cached.signal}):\n${cached.stdout}${cached.stderr}`, 1)
if (`${cached.stdout}${cached.stderr}`.trim()) say(`${cached.stdout}${cached.stderr}`.trimEnd())
seaAssets['commands.cache'] = codeCache
const mb = (f) => `${(statSync(f).size / 1e6).toFixed(1)} MB`
say(`build-binary: bundled in ${Date.now() - started} ms: main script ${mb(main)}, commands ${mb(commandsBundle)}, their code cache ${mb(codeCache)}`)

// --- the SEA blob, injected into a copy of this node --------------------------------
const blob = join(work, 'sea-prep.blob')
const seaConfig = join(work, 'sea-config.json')
// useSnapshot: the main script's heap after loading (build/sea-entry.cjs) is stored in the blob.
writeFileSync(seaConfig, JSON.stringify({main, output: blob, disableExperimentalSEAWarning: true, useSnapshot: true, assets: seaAssets}, null, 2))
const sea = spawnSync(process.execPath, ['--experimental-sea-config', seaConfig], {stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8'})
const captured = [sea.stdout, sea.stderr]
if (sea.status !== 0) fail(`node --experimental-sea-config failed (${sea.status ?? sea.signal}):\n${captured.join('')}`, 1)
const out = resolve(flags.out)
mkdirSync(dirname(out), {recursive: true})
rmSync(out, {force: true})
copyFileSync(process.execPath, out)
chmodSync(out, 0o755)
const {inject} = require('postject')
// postject writes its ELF warnings to this process's stdout and stderr: captured for the log.
const writes = {stdout: process.stdout.write, stderr: process.stderr.write}
const capture = (chunk, encoding, done) => {
  captured.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'))
  if (typeof encoding === 'function') encoding()
  else if (typeof done === 'function') done()
  return true
}
process.stdout.write = capture
process.stderr.write = capture
try {
  await inject(out, 'NODE_SEA_BLOB', readFileSync(blob), {sentinelFuse: SEA_FUSE})
} finally {
  process.stdout.write = writes.stdout
  process.stderr.write = writes.stderr
}
const tools = captured.join('')
say(tools.trimEnd())
const logFile = `${out}.build.log`
writeFileSync(logFile, `${log.join('\n')}\n`)
const shown = (p) => relative(process.cwd(), p) || p
const summary = binarySummary({
  out: shown(out),
  bytes: statSync(out).size,
  node: process.version,
  notPinned: embedded.filter((a) => !a.matchesPin).map((a) => `${a.id} ${a.version}`),
  warnings: countWarnings(tools, bundlerWarnings.length),
  log: shown(logFile),
})
for (const line of summary) console.error(line)
console.log(out)
