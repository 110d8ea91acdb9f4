// The operator's home directory as kubectl and the XDG base-directory spec read it: $HOME
// when set (client-go's homedir.HomeDir does the same), else what the OS says. os.homedir()
// alone reads the process environment below Node, which a change of HOME in this process
// (a test's worker thread, an embedding script) does not reach.
import {homedir} from 'node:os'

export function homeDir(): string {
  return process.env.HOME || homedir()
}
