// Every bundle ichor publishes survives Kokumi's re-serialisation unchanged. Kokumi 0.14.0
// decodes the bundle's documents one by one and silently stops at the first it cannot decode
// (internal/renderer/renderer.go NormalizeYAML), then Argo CD prunes what the artifact no
// longer holds: a document lost there deletes live objects. The normaliser is the Kokumi
// simulator's (test/harness/kokumi-simulator.ts), which follows that file.
import {parseAllDocuments, stringify} from 'yaml'
import {describe, expect, it} from 'vitest'
import {generateStackSecrets, prepareStack} from '../../src/lib/stack/prepare.js'
import {normalizeYaml} from '../harness/kokumi-simulator.js'
import {UPSTREAM} from '../support/upstream.js'

/** The data of each document, as a YAML 1.1 reader after Kokumi would see it. */
function documents(text: string): unknown[] {
  return parseAllDocuments(text, {version: '1.1'} as const).map((d) => d.toJS())
}

// Strings an operator can put into a bundle through Argo CD's values, each of which trips a
// naive emitter: non-BMP and no-break-space characters, lines that read as document markers or
// directives inside a block, trailing spaces a literal block cannot keep, and scalars a
// YAML 1.1 reader takes for booleans or numbers. (Characters libyaml refuses raw, such as BEL
// or DEL, never get this far: helm's own render refuses them in a value.)
const HOSTILE = [
  'astral \u{1F600} and nbsp \u00a0',
  'first line\n---\n%YAML 1.2\n...\nlast line',
  'trailing spaces   \nsecond line  ',
  'on',
  '1_000',
  '0644',
  '"quoted" and \'single\' and #hash: colon',
]

describe('published bundles through Kokumi 0.14.0 NormalizeYAML', () => {
  it('keep every document and every value, with default and with hostile user values', async () => {
    const annotations = Object.fromEntries(HOSTILE.map((v, i) => [`example.com/v${i}`, v]))
    const cm = {'timeout.reconciliation': HOSTILE.join('\n')}
    for (const argocdValues of [undefined, {global: {podAnnotations: annotations}, configs: {cm}}]) {
      const stack = await prepareStack({
        argocdChartPath: UPSTREAM.argocdChart,
        kokumiManifestPath: UPSTREAM.kokumiManifest,
        generated: generateStackSecrets(),
        argocdValues,
      })
      for (const c of Object.values(stack.components)) {
        const manifest = c.rendered.manifest
        const normalized = normalizeYaml(manifest)
        const before = documents(manifest)
        expect(normalized.stoppedAt, `${c.component}: Kokumi would drop documents`).toBeUndefined()
        expect(normalized.kept, c.component).toBe(before.length)
        expect(documents(normalized.text), c.component).toEqual(before)
      }
      if (argocdValues) {
        const cmObject = documents(stack.components.argocd.rendered.manifest).find((d: any) => d.kind === 'ConfigMap' && d.metadata.name === 'argocd-cm') as {
          data: Record<string, string>
        }
        for (const [k, v] of Object.entries(cm)) expect(cmObject.data[k], k).toBe(v)
      }
    }
  })

  it('the check can fail: a raw DEL, as the `yaml` package writes it, ends the bundle at that document', () => {
    const objects = [
      {kind: 'ConfigMap', metadata: {name: 'a'}},
      {kind: 'ConfigMap', metadata: {name: 'b'}, data: {x: 'del \u007f'}},
      {kind: 'ConfigMap', metadata: {name: 'c'}},
    ]
    const text = objects.map((o) => `---\n${stringify(o)}`).join('')
    const normalized = normalizeYaml(text)
    expect(normalized.stoppedAt?.index).toBe(1)
    expect(normalized.kept).toBe(1)
  })
})
