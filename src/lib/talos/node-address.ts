// What names a Talos node on the command line: an IP address or a DNS host name (talosctl's
// --nodes takes either). Checked before anything is contacted.
import {isIP} from 'node:net'

const HOSTNAME = /^(?=.{1,253}$)[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$/

/** Why `node` cannot name a node, or undefined when it can. */
export function nodeProblem(node: string): string | undefined {
  if (!isIP(node) && (!HOSTNAME.test(node) || /^[\d.]+$/.test(node))) return `"${node}" is not an IP address or host name`
  return undefined
}
