// A module of the single binary that is evaluated when the process starts, not when its
// startup snapshot is built (scripts/build-binary.mjs picks them: they read the terminal,
// the environment or argv at load time: colour support, terminal width, the spinner
// choice, the home folder, process.stdout's EPIPE listener). Consumers get this stand-in,
// which loads the real module on first use; every use of a deferred module during the
// snapshot build is an error, so the build fails instead of baking in the build machine's
// terminal.
const v8 = require('node:v8')

module.exports = function deferred(load, name, esModule) {
  let real
  let loaded = false
  const target = () => {
    if (!loaded) {
      if (v8.startupSnapshot.isBuildingSnapshot()) throw new Error(`${name} must not be loaded in the startup snapshot (see build/deferred.cjs)`)
      real = load()
      loaded = true
    }
    return real
  }
  // An arrow function as the proxy's target: callable (clean-stack exports a function) and
  // with no non-configurable own property that the traps below would have to report.
  return new Proxy(() => {}, {
    // TypeScript's and esbuild's interop helpers ask this while their importer loads.
    get: (_, key) => (key === '__esModule' && !loaded ? esModule : target()[key]),
    set: (_, key, value) => {
      target()[key] = value
      return true
    },
    has: (_, key) => key in target(),
    ownKeys: () => Reflect.ownKeys(target()),
    getOwnPropertyDescriptor: (_, key) => {
      const d = Reflect.getOwnPropertyDescriptor(target(), key)
      return d && {...d, configurable: true}
    },
    apply: (_, self, args) => Reflect.apply(target(), self, args),
  })
}
