// Holds a private temp dir open (printing its path) until the process is signalled, for
// the test that a signal still removes it. Argument: the folder name prefix.
import {withPrivateTempDir} from '../../src/lib/fs/private-files.js'

await withPrivateTempDir(process.argv[2]!, async (dir) => {
  process.stdout.write(`${dir}\n`)
  await new Promise(() => setInterval(() => {}, 1000))
})
