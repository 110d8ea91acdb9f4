// `cni values edit` / `stack values edit` with -f/--set/KEY=VALUE (issue 23 point 1): the
// editor opens with the change applied to the stored layer, and saving it applies it, also
// when the buffer is saved as it was opened. Without a change given, an unchanged buffer
// still changes nothing.
import {chmodSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, describe, expect, it} from 'vitest'
import {editValuesBuffer} from '../../src/lib/values/edit-buffer.js'

const dir = mkdtempSync(join(tmpdir(), 'ichor-edit-seed-'))
// An "editor" that only records what it was shown.
const editor = join(dir, 'editor.sh')
writeFileSync(editor, `#!/bin/sh\ncp "$1" '${join(dir, 'seen.yaml')}'\n`)
chmodSync(editor, 0o755)
const saved = {EDITOR: process.env.EDITOR, VISUAL: process.env.VISUAL}
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

describe('editValuesBuffer with a change from the command line', () => {
  it('a seeded buffer saved as opened is the seeded layer, and the header says so', async () => {
    process.env.VISUAL = editor
    const user = await editValuesBuffer({
      header: ['# header'],
      initial: {hubble: {relay: {enabled: true}}},
      seeded: true,
      fileName: 'v.yaml',
      check: async () => undefined,
    })
    expect(user).toEqual({hubble: {relay: {enabled: true}}})
    expect(readFileSync(join(dir, 'seen.yaml'), 'utf8')).toMatch(/already in this buffer: *\n# save and quit to apply them/)
  })
  it('without a seed, an unchanged buffer is nothing to do', async () => {
    process.env.VISUAL = editor
    expect(await editValuesBuffer({header: ['# header'], initial: {a: 1}, fileName: 'v.yaml', check: async () => undefined})).toBeUndefined()
  })
})
