// bcrypt for Kokumi's `kokumi-server-auth` password hash (Kokumi checks logins with Go's
// bcrypt.CompareHashAndPassword), on the bcryptjs library. The salt is derived from the
// generated secrets, so the same stored password always renders the same Secret bytes.
import {createHash, createHmac, timingSafeEqual} from 'node:crypto'
import bcrypt from 'bcryptjs'
import {IchorError} from '../errors/errors.js'

/** `$2b$<cost>$<salt><hash>` for a password and a 16-byte salt. */
export function bcryptHash(password: string, salt: Buffer, cost = 10): string {
  if (salt.length !== 16) throw new IchorError(`bcrypt needs a 16-byte salt, got ${salt.length}`)
  if (!Number.isInteger(cost) || cost < 4 || cost > 31) throw new IchorError(`bcrypt cost must be an integer from 4 to 31, got ${cost}`)
  const saltString = `$2b$${String(cost).padStart(2, '0')}$${bcrypt.encodeBase64(salt, 16)}`
  return bcrypt.hashSync(password, saltString)
}

/** Whether `password` matches a `$2a$`/`$2b$`/`$2y$` hash. */
export function bcryptVerify(password: string, hash: string): boolean {
  if (!/^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/.test(hash)) throw new IchorError('not a bcrypt hash ($2a$/$2b$/$2y$, cost, 22 salt and 31 hash characters)')
  return bcrypt.compareSync(password, hash)
}

/**
 * A salt derived from the generated secrets themselves, so rendering the Secret twice from
 * the same stored password gives the same bytes (no spurious diff on a rerun). It is as
 * unique as the random password and signing key it comes from, which is all a salt must be.
 */
export function deriveSalt(...secrets: string[]): Buffer {
  const h = createHash('sha256').update('ichor bcrypt salt v1')
  for (const s of secrets) h.update('\0').update(s, 'utf8')
  return h.digest().subarray(0, 16)
}

/**
 * What ties a stored password to the bcrypt hash ichor wrote from it, so a later check that
 * the two Secrets still agree is an HMAC and a string compare, not a bcrypt run (0.1 s of CPU
 * on every `stack status`). Keyed by the password itself: it is stored in the same Secret as
 * the password, and a password edited by hand no longer matches it (then bcrypt decides).
 */
export function hashBinding(password: string, hash: string): string {
  return createHmac('sha256', password).update('ichor kokumi password-hash v1\0').update(hash).digest('base64url')
}

export function bindingHolds(password: string, hash: string, binding: string): boolean {
  const expected = Buffer.from(hashBinding(password, hash))
  const given = Buffer.from(binding)
  return expected.length === given.length && timingSafeEqual(expected, given)
}
