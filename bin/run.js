#!/usr/bin/env -S node --max-semi-space-size=4
// Entry point of the ichor CLI: oclif reads the generated manifest, so --help needs no command imports.
// The shebang gives V8 a small young generation: a short-lived CLI that parses a few MB of
// YAML then peaks at about 150 MB instead of 205 MB, in the same time (npm run bench).
import {flush, run} from '@oclif/core'

const argv = process.argv.slice(2)
// `ichor --version` is `ichor version` (oclif's own prints only the CLI's user agent).
if (argv[0] === '--version') argv[0] = 'version'
try {
  await run(argv, import.meta.url)
  await flush()
} catch (error) {
  const {handleTopLevelError} = await import('../dist/lib/cli/top-level.js')
  handleTopLevelError(error, argv)
}
