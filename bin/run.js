#!/usr/bin/env -S node --max-semi-space-size=4
// Entry point of the ichor CLI: oclif reads the generated manifest, so --help needs no command imports.
// The shebang gives V8 a small young generation: a short-lived CLI that parses a few MB of
// YAML then peaks at about 150 MB instead of 205 MB, in the same time (npm run bench).
// oclif checks Node against its own engines range (>=18) when it loads, requiring all of
// semver for it: a sixth of `ichor --help`'s start-up. ichor's own range (>=20.11) is the
// stricter one, so that check never says anything to ichor's users; the binary skips it too.
const engineWarning = process.env.OCLIF_DISABLE_ENGINE_WARNING
process.env.OCLIF_DISABLE_ENGINE_WARNING = '1'
const {Config, flush, run, settings} = await import('@oclif/core')
if (engineWarning === undefined) delete process.env.OCLIF_DISABLE_ENGINE_WARNING
else process.env.OCLIF_DISABLE_ENGINE_WARNING = engineWarning
// ichor runs its compiled dist/ only. Under NODE_ENV=development or test (a JS developer's shell,
// any test runner) oclif would otherwise look for TypeScript sources to transpile on every run:
// it loads the typescript compiler to read tsconfig.json and starts a module-loader thread, 0.6 s
// of CPU per command (`--version` 1.05 s instead of 0.36 s), and may run src/ instead of dist/.
settings.enableAutoTranspile = false

const {entryArgv, flagGivenToTopic} = await import('../dist/lib/cli/entry-argv.js')
const argv = entryArgv(process.argv.slice(2))
try {
  // Loaded once here, and handed to run(): the topic check below needs the same catalog.
  const config = await Config.load(import.meta.url)
  const topicFlag = flagGivenToTopic(argv, config)
  if (topicFlag) throw (await import('../dist/lib/cli/top-level.js')).topicFlagError(topicFlag, config.bin)
  await run(argv, config)
  await flush()
} catch (error) {
  const {handleTopLevelError} = await import('../dist/lib/cli/top-level.js')
  // The commands and topics an unknown command is compared with, loaded only then.
  await handleTopLevelError(error, argv, () => Config.load(import.meta.url))
}
