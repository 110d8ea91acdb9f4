// Entry of the single binary (scripts/build-binary.mjs bundles it with esbuild into the
// CommonJS main script of a Node single executable application).
//
// oclif normally reads package.json, its manifest and each command's file from disk; a
// binary has none of them. So oclif gets its root plugin ready-made: package.json and the
// manifest are bundled in, and the commands live in a second bundle (the SEA asset
// "commands.cjs") that is compiled only when a command runs: `--help` and topic listings
// compile and run oclif alone. That bundle shares this oclif instance (its require of
// "@oclif/core" is answered with it), so settings and caches are one. The oclif plugins
// package.json names (help, autocomplete) are bundled the same way, as plugins of their own.
//
// The binary starts from a V8 startup snapshot (useSnapshot): scripts/build-binary.mjs runs
// this file once at build time, so loading oclif, package.json and the manifest is done
// then; at run time Node deserializes that heap and calls main(). Whatever depends on the
// machine it runs on is read in main() or in a module the build defers (build/deferred.cjs).
const {dirname} = require('node:path')
const sea = require('node:sea')
const v8 = require('node:v8')
const oclif = require('@oclif/core')
const {manifest, pjson, plugins} = require('ichor:bundle')
const {entryArgv, flagGivenToTopic} = require('../dist/lib/cli/entry-argv.js')

const {commandsScript, evaluate} = require('./code-cache.cjs')

let commandModules
let debug

/** The binary's own debug lines (DEBUG=ichor:binary), through oclif's debug package. */
function trace(...args) {
  debug ??= require('debug')('ichor:binary')
  debug(...args)
}

/** The commands bundle's exports: `commands` (plugin name -> command id -> loader), `handleTopLevelError` and `topicFlagError`. */
function commands() {
  if (!commandModules) {
    // Compiled from the code cache made at build time (build/code-cache.cjs), not parsed again.
    const cache = sea.getAsset('commands.cache')
    const script = commandsScript(sea.getAsset('commands.cjs', 'utf8'), Buffer.from(cache))
    trace(`commands compiled, code cache ${script.cachedDataRejected ? 'REJECTED' : 'accepted'}`)
    commandModules = evaluate(script, oclif, require, process.execPath, dirname(process.execPath))
  }
  return commandModules
}

/** pjson.oclif.topics as oclif's own plugin lists them: nested topics named "parent:child". */
function topicList(topics, base = '') {
  return Object.entries(topics ?? {}).flatMap(([name, topic]) => [{...topic, name: `${base}${name}`}, ...topicList(topic.subtopics, `${base}${name}:`)])
}

// Each plugin's manifest commands as oclif's own plugin lists them, sorted once at snapshot time.
const sortedCommands = new Map(
  [{pjson, manifest}, ...plugins].map((p) => [
    p.pjson.name,
    Object.values(p.manifest.commands)
      .map((cached) => ({...cached, pluginAlias: p.pjson.name, pluginType: 'core'}))
      .sort((a, b) => a.id.localeCompare(b.id)),
  ]),
)

/** oclif's Plugin interface, served from the bundle instead of the file system. */
class BundledPlugin {
  constructor(root, {pjson: pluginPjson, manifest: pluginManifest}, isRoot) {
    this.root = root
    this.pjson = pluginPjson
    this.name = pluginPjson.name
    this.alias = pluginPjson.name
    this.version = pluginPjson.version
    this._base = `${pluginPjson.name}@${pluginPjson.version}`
    this.isRoot = isRoot
    this.type = 'core'
    this.valid = true
    this.moduleType = 'commonjs'
    this.hasManifest = true
    this.commandsDir = undefined
    this.hooks = {}
    this.options = {root, isRoot, pjson: pluginPjson}
    this.manifest = pluginManifest
    this.commands = sortedCommands.get(this.name).map((cached) => ({...cached, load: () => this.findCommand(cached.id, {must: true})}))
  }

  get commandIDs() {
    return Object.keys(this.manifest.commands)
  }

  get topics() {
    return topicList(this.pjson.oclif.topics)
  }

  async load() {}

  async findCommand(id, opts = {}) {
    const loaders = commands().commands[this.name] ?? {}
    const cmd = loaders[id]?.()
    if (cmd) trace(`evaluated command ${id} (1 of ${Object.keys(loaders).length})`)
    if (!cmd) {
      if (opts.must) throw new Error(`command ${id} not found`)
      return undefined
    }
    cmd.id = id
    cmd.plugin = this
    return cmd
  }
}

function main() {
  // debug (oclif's logger) read DEBUG when the snapshot was built; read it again.
  if (process.env.DEBUG) require('debug').enable(process.env.DEBUG)
  const root = process.execPath
  // A plugin's root is where it would be installed beside the executable; nothing is read there.
  const bundled = [
    new BundledPlugin(root, {pjson, manifest}, true),
    ...plugins.map((p) => new BundledPlugin(`${dirname(root)}/node_modules/${p.pjson.name}`, p, false)),
  ]
  const loadOptions = {root, pjson, plugins: new Map(bundled.map((p) => [p.name, p]))}
  // A single executable application repeats the executable as argv[1].
  const argv = entryArgv(process.argv.slice(2))
  // As bin/run.js: errors before or around a command, unknown commands, are ichor's to report.
  oclif.Config.load(loadOptions)
    .then((config) => {
      // As bin/run.js: a flag given to a topic is refused, not answered with the topic's help.
      const topicFlag = flagGivenToTopic(argv, config)
      if (topicFlag) throw commands().topicFlagError(topicFlag, config.bin)
      return oclif.run(argv, config)
    })
    .then(() => oclif.flush())
    .catch((error) => commands().handleTopLevelError(error, argv, () => oclif.Config.load(loadOptions)))
}

if (v8.startupSnapshot.isBuildingSnapshot()) v8.startupSnapshot.setDeserializeMainFunction(main)
else main()
