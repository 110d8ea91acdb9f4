import {readFileSync} from 'node:fs'
import {describe, expect, it} from 'vitest'
import {bcryptHash, bcryptVerify, bindingHolds, deriveSalt, hashBinding} from '../../src/lib/stack/bcrypt.js'
import {opensKokumiHash} from '../../src/lib/stack/generated-secrets.js'
import {parseObjects} from '../../src/lib/stack/objects.js'
import {UPSTREAM} from '../support/upstream.js'

describe('bcrypt', () => {
  it('verifies the hash Kokumi ships for its admin/admin login (real install.yaml)', () => {
    const secret = parseObjects(readFileSync(UPSTREAM.kokumiManifest, 'utf8')).find((o) => o.metadata.name === 'kokumi-server-auth')!
    const hash = (secret.stringData as Record<string, string>)['password-hash']!
    expect(hash.startsWith('$2y$')).toBe(true)
    expect(bcryptVerify('admin', hash)).toBe(true)
    expect(bcryptVerify('admin1', hash)).toBe(false)
  })

  it('matches the OpenBSD / crypt_blowfish test vectors', () => {
    expect(bcryptVerify('U*U', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW')).toBe(true)
    expect(bcryptVerify('', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy')).toBe(true)
    expect(bcryptVerify('U*U*', '$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW')).toBe(false)
  })

  it('hashes to a $2b$ string that verifies, deterministically for a given salt', () => {
    const salt = deriveSalt('a-generated-password', 'a-signing-key')
    const hash = bcryptHash('a-generated-password', salt, 5)
    expect(hash).toMatch(/^\$2b\$05\$[./A-Za-z0-9]{53}$/)
    expect(bcryptHash('a-generated-password', salt, 5)).toBe(hash)
    expect(bcryptVerify('a-generated-password', hash)).toBe(true)
    expect(bcryptVerify('another-password', hash)).toBe(false)
    expect(deriveSalt('other', 'a-signing-key').equals(salt)).toBe(false)
  })

  it('refuses a bad salt or cost', () => {
    expect(() => bcryptHash('x', Buffer.alloc(8))).toThrow(/16-byte salt/)
    expect(() => bcryptHash('x', Buffer.alloc(16), 3)).toThrow(/cost/)
  })

  it("ichor's copy answers with its bound hash when Kokumi holds exactly it; anything else goes to bcrypt", () => {
    const password = 'a-generated-password-18'
    const hash = bcryptHash(password, deriveSalt(password, 'signing-key'), 4)
    const held = {password, 'password-hash': hash, 'password-hash-binding': hashBinding(password, hash)}
    expect(bindingHolds(password, hash, held['password-hash-binding'])).toBe(true)
    expect(opensKokumiHash(held, hash)).toEqual({matches: true, by: 'binding'})
    // Kokumi holds another hash (its UI changed the password): bcrypt says no.
    const other = bcryptHash('another-password-000', deriveSalt('x'), 4)
    expect(opensKokumiHash(held, other)).toEqual({matches: false, by: 'bcrypt'})
    // The password in ichor's copy edited by hand: the binding no longer holds, bcrypt says no.
    expect(opensKokumiHash({...held, password: 'edited-by-hand-0000'}, hash)).toEqual({matches: false, by: 'bcrypt'})
    // A copy without the binding (an older ichor) or with a forged one: bcrypt decides, and says yes for the right password.
    expect(opensKokumiHash({password}, hash)).toEqual({matches: true, by: 'bcrypt'})
    expect(opensKokumiHash({...held, 'password-hash-binding': 'x'.repeat(43)}, hash)).toEqual({matches: true, by: 'bcrypt'})
    expect(opensKokumiHash({...held, 'password-hash-binding': 'x'.repeat(43), password: 'edited-by-hand-0000'}, hash)).toEqual({matches: false, by: 'bcrypt'})
    // Not a bcrypt hash at all.
    expect(opensKokumiHash(held, 'plain')).toEqual({matches: false, by: 'bcrypt'})
  })
})
