// src/lib's folders import only down their layers (docs/architecture.md), with no circle
// between files: scripts/layers.mjs counts both; a new upward import fails here.
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterAll, describe, expect, it} from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'ichor-layers-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

function layers(root: string): string {
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts/layers.mjs'), root], {encoding: 'utf8'})
  if (run.status !== 0) throw new Error(`layers.mjs failed (exit ${run.status}): ${run.stderr}`)
  return run.stdout
}

function tree(name: string, files: Record<string, string>): string {
  for (const [path, text] of Object.entries(files)) {
    const file = join(dir, name, 'src/lib', path)
    mkdirSync(dirname(file), {recursive: true})
    writeFileSync(file, text)
  }
  return join(dir, name)
}

describe('the layers of src/lib', () => {
  it('the check sees an upward import and a circle when there is one (so the next case can fail)', () => {
    const root = tree('bad', {
      'errors/errors.ts': "import {run} from '../cli/run.js'\nexport const e = run\n",
      'cli/run.ts': "import {e} from '../errors/errors.js'\nexport const run = () => e\n",
    })
    const out = layers(root)
    expect(out).toContain('upward imports: 1\n  errors/errors.ts -> cli/run.ts')
    expect(out).toContain('circles: 1')
  })

  it('src/lib has no upward import and no circle', () => {
    const out = layers(ROOT)
    expect(out).toMatch(/^upward imports: 0\ncircles: 0\n$/)
  })
})
