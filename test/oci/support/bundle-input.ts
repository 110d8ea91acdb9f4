// A fixed bundle input shared by the in-process test and the child process of the
// determinism test: nested paths, a non-ASCII name, a Buffer and out-of-order entries.
import type {BundleFile} from '../../../src/lib/oci/bundle.js'

export const FIXED_FILES: BundleFile[] = [
  {path: 'manifest.yaml', content: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'},
  {path: 'crds/z.yaml', content: Buffer.from('kind: CustomResourceDefinition\n')},
  {path: 'crds/a.yaml', content: 'kind: CustomResourceDefinition\n'},
  {path: 'notes/größe.txt', content: 'ü\n'.repeat(300)},
  {path: 'a-first.yaml', content: ''},
]
