// Starts a streamed private write of argv[2] and exits in the same turn of the event loop, as
// ichor's interrupt handler does when a SIGTERM lands just as a backup starts writing: for the
// test that no temp file is left beside the path. A second exit hook, run after ichor's, holds
// the process for a moment, as a loaded machine does between the hook and the process's end.
import {onExit} from 'signal-exit'
import {writePrivateFileFromStream} from '../../src/lib/fs/private-files.js'

async function* chunks(): AsyncIterable<Uint8Array> {
  yield new TextEncoder().encode('part of a backup')
}

void writePrivateFileFromStream(process.argv[2]!, chunks())
onExit(() => {
  const end = Date.now() + 100
  while (Date.now() < end) {
    // busy: worker threads go on meanwhile
  }
})
process.exit(130)
