// A Talos machine config with its secrets left out: what the dry run writes into its folder and
// what a config change shows as a diff.
import {isScalar, parseAllDocuments, visit} from 'yaml'

// Fields of a Talos config that hold key material or tokens (v1alpha1 and the multi-document
// kinds of pkg/machinery/config/types, v1.14.1): their values never reach the dry run's folder.
const SECRET_KEYS = new Set([
  'key',
  'token',
  'secret',
  'clusterSecret',
  'secretboxEncryptionSecret',
  'aescbcEncryptionSecret',
  'bootstraptoken',
  'id',
  'clusterID',
])

/** A machine config with every secret value replaced by a placeholder. */
export function redactMachineConfig(text: string): string {
  return parseAllDocuments(text)
    .map((doc) => {
      visit(doc, {
        Pair(_, pair) {
          if (!isScalar(pair.key) || !isScalar(pair.value)) return
          const name = String(pair.key.value)
          const value = String(pair.value.value ?? '')
          if (SECRET_KEYS.has(name) || /PRIVATE KEY-----/.test(value)) pair.value.value = `<left out by ichor --dry-run: ${value.length} bytes>`
        },
      })
      return doc.toString({lineWidth: 0})
    })
    .join('---\n')
}
