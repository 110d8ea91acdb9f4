// The Talos admin bundle as the cluster keeps it: sealed with age (the real age-encryption
// library, scrypt for a passphrase, X25519 for an identity), the key file rules, and an
// older ichor's plaintext Secret read as is.
import {chmodSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {inspect} from 'node:util'
import {armor, generateX25519Identity} from 'age-encryption'
import {describe, expect, it} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import {
  BUNDLE_FORMAT_ANNOTATION,
  bundleOfSecret,
  openBundle,
  SEALED_FORMAT,
  SEALED_KEY,
  sealedBundleSecret,
  storedFormatOf,
  WrongStateKeyError,
  type SecretWithData,
} from '../../src/lib/state/sealed-bundle.js'
import {givenStateKey, missingStateKeyError, readStateKeyFile, STATE_PASSPHRASE_ENV, StateKey} from '../../src/lib/state/state-key.js'

const SECRETS =
  'cluster:\n  id: abc\n  secret: c2VjcmV0LWNsdXN0ZXI=\ntrustdinfo:\n  token: abcdef.0123456789abcdef\ncerts:\n  os:\n    crt: LS0tLS1CRUdJTg==\n    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0=\n'
const TALOSCONFIG = 'context: e2e\ncontexts:\n  e2e:\n    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0=\n'
const bundle = {secretsYaml: Buffer.from(SECRETS), talosconfig: Buffer.from(TALOSCONFIG)}
const decoded = (s: SecretWithData) =>
  Object.values(s.data ?? {})
    .map((v) => Buffer.from(v, 'base64').toString('utf8'))
    .join('\n')
const caught = async (f: () => unknown) => {
  try {
    await f()
  } catch (e) {
    return e
  }
  return undefined
}

function keyFile(content: string, mode = 0o600): string {
  const file = join(mkdtempSync(join(tmpdir(), 'ichor-key-')), 'key')
  writeFileSync(file, content)
  chmodSync(file, mode)
  return file
}

describe('the sealed Talos bundle', () => {
  it('with a passphrase: the Secret holds only an armored age file and names its format; the same passphrase opens it, another is exit 2 naming the Secret', async () => {
    // Given a passphrase key
    const key = StateKey.passphrase('correct horse battery staple', 'test')
    // When the bundle is sealed into its Secret
    const secret = await sealedBundleSecret(bundle, key)
    // Then it holds ciphertext only, in bundle.age, with the format annotation
    expect(Object.keys(secret.data!)).toEqual([SEALED_KEY])
    expect(secret.metadata.annotations).toEqual({[BUNDLE_FORMAT_ANNOTATION]: SEALED_FORMAT})
    const text = decoded(secret)
    expect(text).toMatch(/^-----BEGIN AGE ENCRYPTED FILE-----\n/)
    for (const needle of ['abcdef.0123456789abcdef', 'key:', 'c2VjcmV0LWNsdXN0ZXI', 'LS0tLS1CRUdJTi', 'BEGIN ED25519']) expect(text).not.toContain(needle)
    expect(Buffer.from(armor.decode(text)).toString('latin1')).toContain('-> scrypt ')
    // And the same passphrase from elsewhere opens it
    expect(
      await bundleOfSecret(
        secret,
        async () => StateKey.passphrase('correct horse battery staple', 'another laptop'),
        () => undefined,
      ),
    ).toEqual({format: 'sealed', bundle})
    // And a wrong one is a usage error naming the Secret and where the key came from
    const wrong = await caught(() =>
      bundleOfSecret(
        secret,
        async () => StateKey.passphrase('wrong', '--state-passphrase-file ./wrong'),
        () => undefined,
      ),
    )
    expect(wrong).toBeInstanceOf(WrongStateKeyError)
    expect(reportOf(wrong)).toMatchObject({
      exitCode: 2,
      message: 'the passphrase from --state-passphrase-file ./wrong does not decrypt ichor-system/ichor-talos; nothing was changed',
    })
  })

  it('with an age identity file: sealed to its X25519 recipient, opened by the identity, not by another', async () => {
    const identity = await generateX25519Identity()
    const key = await readStateKeyFile(keyFile(`# created: 2026-12-01\n# public key: age1…\n${identity}\n`), 'test')
    expect(key.kind).toBe('identity')
    expect(key.recipient).toMatch(/^age1/)
    const secret = await sealedBundleSecret(bundle, key)
    expect(Buffer.from(armor.decode(decoded(secret))).toString('latin1')).toContain('-> X25519 ')
    expect(
      (
        await bundleOfSecret(
          secret,
          async () => key,
          () => undefined,
        )
      )?.bundle,
    ).toEqual(bundle)
    const other = await StateKey.identity(await generateX25519Identity(), 'other')
    expect(
      reportOf(
        await caught(() =>
          bundleOfSecret(
            secret,
            async () => other,
            () => undefined,
          ),
        ),
      ),
    ).toMatchObject({exitCode: 2})
  })

  it('opened with a passphrase under 12 characters: the one place that opens it warns (every command that opens it says so), naming where the key came from', async () => {
    // Given a bundle sealed with a short passphrase (an older ichor did not refuse one)
    const short = StateKey.passphrase('pw-short', '--state-passphrase-file ./short')
    const secret = await sealedBundleSecret(bundle, short)
    // When it is opened, Then the warning is given once, without the secret
    const warnings: string[] = []
    expect(
      (
        await bundleOfSecret(
          secret,
          async () => short,
          (w) => warnings.push(w),
        )
      )?.bundle,
    ).toEqual(bundle)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('--state-passphrase-file ./short')
    expect(warnings[0]).toContain('shorter than 12 characters')
    expect(warnings[0]).not.toContain('pw-short')
    // And a long one, or a plaintext copy that needs no key, says nothing
    const long = StateKey.passphrase('correct horse battery staple', 'test')
    const quiet: string[] = []
    await bundleOfSecret(
      await sealedBundleSecret(bundle, long),
      async () => long,
      (w) => quiet.push(w),
    )
    expect(quiet).toEqual([])
  })

  it("an older ichor's plaintext Secret (no annotation) is read without asking for the key; an unknown format is refused", async () => {
    const plaintext: SecretWithData = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {name: 'ichor-talos', namespace: 'ichor-system'},
      data: {'secrets.yaml': bundle.secretsYaml.toString('base64'), talosconfig: bundle.talosconfig.toString('base64')},
    }
    expect(storedFormatOf(plaintext)).toBe('plaintext')
    expect(
      await bundleOfSecret(
        plaintext,
        () => Promise.reject(new Error('the key is not needed')),
        () => undefined,
      ),
    ).toEqual({format: 'plaintext', bundle})
    const future = {...plaintext, metadata: {...plaintext.metadata, annotations: {[BUNDLE_FORMAT_ANNOTATION]: 'age-armor-v9'}}}
    expect(reportOf(await caught(() => storedFormatOf(future)))).toMatchObject({exitCode: 2, message: expect.stringContaining('age-armor-v9')})
  })

  it('an armored file that is not age is an error naming the Secret', async () => {
    expect(
      String(await caught(() => openBundle('-----BEGIN AGE ENCRYPTED FILE-----\nnope\n-----END AGE ENCRYPTED FILE-----\n', StateKey.passphrase('x', 't')))),
    ).toContain('ichor-system/ichor-talos holds no readable age file')
  })
})

describe('the key file', () => {
  it('a passphrase is the content without its final newline; the key never shows in JSON or inspect', async () => {
    const key = await readStateKeyFile(keyFile('  two words \n'), '--state-passphrase-file f')
    expect(key.kind).toBe('passphrase')
    expect(key.reveal()).toBe('  two words ')
    expect(JSON.stringify(key)).toBe('{"kind":"passphrase","origin":"--state-passphrase-file f"}')
    expect(inspect(key)).not.toContain('two words')
  })

  it('is refused, exit 2, as ssh refuses a key: readable by group or others, missing, empty, a folder', async () => {
    for (const mode of [0o640, 0o604, 0o620]) {
      const file = keyFile('secret\n', mode)
      expect(reportOf(await caught(() => readStateKeyFile(file, '--state-passphrase-file x')))).toMatchObject({
        exitCode: 2,
        message: expect.stringContaining(`is accessible by group or others (mode 0${mode.toString(8)})`),
        hint: `chmod 600 ${file}`,
      })
    }
    expect(reportOf(await caught(() => readStateKeyFile('/nonexistent/key', 'o')))).toMatchObject({
      exitCode: 2,
      message: 'o: cannot read /nonexistent/key (ENOENT)',
    })
    expect(reportOf(await caught(() => readStateKeyFile(keyFile('\n'), 'o')))).toMatchObject({exitCode: 2, message: expect.stringContaining('is empty')})
    expect(reportOf(await caught(() => readStateKeyFile(tmpdir(), 'o')))).toMatchObject({
      exitCode: 2,
      message: expect.stringContaining('is not a regular file'),
    })
  })

  it('the flag wins over the environment variable; neither gives none; the missing-key error names both', async () => {
    const [a, b] = [keyFile('from-flag\n'), keyFile('from-env\n')]
    expect((await givenStateKey(a, {[STATE_PASSPHRASE_ENV]: b}))?.reveal()).toBe('from-flag')
    const fromEnv = await givenStateKey(undefined, {[STATE_PASSPHRASE_ENV]: b})
    expect([fromEnv?.reveal(), fromEnv?.origin]).toEqual(['from-env', `ICHOR_STATE_PASSPHRASE_FILE=${b}`])
    expect(await givenStateKey(undefined, {})).toBeUndefined()
    expect(reportOf(missingStateKeyError('ichor init'))).toMatchObject({
      exitCode: 2,
      hint: expect.stringMatching(/--state-passphrase-file FILE.*ICHOR_STATE_PASSPHRASE_FILE=FILE/),
    })
  })
})
