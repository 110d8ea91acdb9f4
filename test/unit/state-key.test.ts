import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {generateIdentity} from 'age-encryption'
import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {givenStateKey, MIN_PASSPHRASE_LENGTH, requireNewStateKey, shortStateKeyWarning} from '../../src/lib/state/state-key.js'

const keyFile = (content: string) => {
  const path = join(mkdtempSync(join(tmpdir(), 'ichor-state-key-')), 'pass')
  writeFileSync(path, content, {mode: 0o600})
  return path
}

describe('a short state passphrase', () => {
  it('is refused (exit 2, naming the flag, its file and the minimum) when it SETS a new bundle', async () => {
    const path = keyFile('elevenchars\n')
    const key = (await givenStateKey(path, {}))!
    let error: unknown
    try {
      requireNewStateKey(key)
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(IchorError)
    expect((error as IchorError).exitCode).toBe(2)
    expect((error as IchorError).message).toContain(`--state-passphrase-file ${path}`)
    expect((error as IchorError).message).toContain(`${MIN_PASSPHRASE_LENGTH} characters`)
    expect((error as IchorError).message).not.toContain('elevenchars') // the secret is never in a message
  })

  it('names ICHOR_STATE_PASSPHRASE_FILE when the environment gave the file', async () => {
    const path = keyFile('short')
    const key = (await givenStateKey(undefined, {ICHOR_STATE_PASSPHRASE_FILE: path}))!
    expect(() => requireNewStateKey(key)).toThrow(`ICHOR_STATE_PASSPHRASE_FILE=${path}`)
  })

  it('of 12 characters (counted as characters, not bytes) is accepted', async () => {
    expect(MIN_PASSPHRASE_LENGTH).toBe(12)
    const key = (await givenStateKey(keyFile('twelve-chars\n'), {}))!
    expect(requireNewStateKey(key)).toBe(key)
    expect(shortStateKeyWarning(key)).toBeUndefined()
    // 11 characters in 22 bytes is still short
    const accented = (await givenStateKey(keyFile('ééééééééééé'), {}))!
    expect(() => requireNewStateKey(accented)).toThrow(/12 characters/)
  })

  it('is only warned about when it OPENS an existing bundle (the operator cannot change it there)', async () => {
    const path = keyFile('pw-xyz')
    const warning = shortStateKeyWarning((await givenStateKey(path, {}))!)
    expect(warning).toContain(`--state-passphrase-file ${path}`)
    expect(warning).toContain('12')
    expect(warning).not.toContain('pw-xyz')
  })

  it('an age identity is never short', async () => {
    const key = (await givenStateKey(keyFile(`# created by age-keygen\n${await generateIdentity()}\n`), {}))!
    expect(key.kind).toBe('identity')
    expect(requireNewStateKey(key)).toBe(key)
    expect(shortStateKeyWarning(key)).toBeUndefined()
  })
})
