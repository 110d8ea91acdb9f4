// The single binary's commands bundle (the SEA asset "commands.cjs") as a V8 script, and
// the V8 code cache for it that scripts/build-binary.mjs stores beside it: without one, every
// real command parsed the whole 6 MB bundle again. V8 accepts a cache only for the same
// source, V8 version and flags; a rejected one is only slower (build/sea-entry.cjs says so
// under DEBUG=ichor:binary).
//
//   node build/code-cache.cjs BUNDLE OUT    writes the code cache of BUNDLE to OUT
const vm = require('node:vm')

const FILENAME = 'ichor/commands.cjs'

/** The bundle as one CommonJS function: the wrapper is part of the cached source, so build and run time share it. */
function commandsScript(code, cachedData) {
  return new vm.Script(`(function (exports, require, module, __filename, __dirname) {${code}\n})`, {filename: FILENAME, cachedData})
}

/** Runs the bundle's module function; `require` answers "@oclif/core" with `oclif`. */
function evaluate(script, oclif, requireOther, filename, dirname) {
  const module = {exports: {}}
  const requireShared = (id) => (id === '@oclif/core' ? oclif : requireOther(id))
  script.runInThisContext().call(module.exports, module.exports, requireShared, module, filename, dirname)
  return module.exports
}

module.exports = {commandsScript, evaluate}

if (require.main === module) {
  // Run in a process of its own: every command module is evaluated so that the cache holds the
  // functions their loading compiles, not only the bundle's top level.
  const {readFileSync, writeFileSync} = require('node:fs')
  const [bundle, out] = process.argv.slice(2)
  const script = commandsScript(readFileSync(bundle, 'utf8'))
  const exports = evaluate(script, require('@oclif/core'), require, bundle, __dirname)
  for (const plugin of Object.values(exports.commands)) for (const load of Object.values(plugin)) load()
  writeFileSync(out, script.createCachedData())
}
