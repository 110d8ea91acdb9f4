// bcrypt ($2b$), enough to write Kokumi's `password-hash`: the Kokumi server checks the
// admin login with Go's bcrypt.CompareHashAndPassword, so the Secret holds a bcrypt hash,
// never the password. No bcrypt package is installed, so this is the published algorithm
// (Provos & Mazières, "A Future-Adaptable Password Scheme", 1999) over Blowfish; the tests
// check it against the hash Kokumi itself ships for `admin` and the OpenBSD test vectors.
import {createHash} from 'node:crypto'
import {IchorError} from '../errors/errors.js'

const BCRYPT_ALPHABET = './ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
// "OrpheanBeholderScryDoubt", the 24-byte text bcrypt encrypts 64 times.
const MAGIC = Buffer.from('OrpheanBeholderScryDoubt', 'latin1')

let piWords: Uint32Array | undefined

/**
 * Blowfish's initial P-array and S-boxes are the hexadecimal digits of pi's fraction,
 * 1042 32-bit words. Computed once (Machin's formula on BigInts, a few ms) rather than
 * pasted as a 4 KB table.
 */
function blowfishInitWords(): Uint32Array {
  if (piWords) return piWords
  const words = 18 + 4 * 256
  const bits = BigInt(words * 32 + 64) // 64 guard bits
  const one = 1n << bits
  const arctanInv = (x: bigint): bigint => {
    let sum = 0n
    let power = one / x // one / x^(2k+1)
    const x2 = x * x
    for (let k = 1n; power !== 0n; k += 2n) {
      const term = power / k
      sum = ((k - 1n) / 2n) % 2n === 0n ? sum + term : sum - term
      power /= x2
    }
    return sum
  }
  const pi = 16n * arctanInv(5n) - 4n * arctanInv(239n)
  const fraction = (pi - 3n * one) >> 64n // drop the guard bits
  const out = new Uint32Array(words)
  for (let i = 0; i < words; i++) out[i] = Number((fraction >> BigInt((words - 1 - i) * 32)) & 0xffffffffn)
  piWords = out
  return out
}

class Blowfish {
  readonly p: Uint32Array
  readonly s: Uint32Array
  constructor() {
    const init = blowfishInitWords()
    this.p = init.slice(0, 18)
    this.s = init.slice(18)
  }

  /** Encrypts the pair in place: lr[0] = left, lr[1] = right. F is inlined: this loop is bcrypt's whole cost. */
  encrypt(lr: Uint32Array): void {
    let l = lr[0]!
    let r = lr[1]!
    const p = this.p
    const s = this.s
    for (let i = 0; i < 16; i += 2) {
      l ^= p[i]!
      r ^= (((s[l >>> 24]! + s[256 | ((l >>> 16) & 0xff)]!) ^ s[512 | ((l >>> 8) & 0xff)]!) + s[768 | (l & 0xff)]!)
      r ^= p[i + 1]!
      l ^= (((s[r >>> 24]! + s[256 | ((r >>> 16) & 0xff)]!) ^ s[512 | ((r >>> 8) & 0xff)]!) + s[768 | (r & 0xff)]!)
    }
    lr[0] = r ^ p[17]!
    lr[1] = l ^ p[16]!
  }

  /** The "expensive key schedule" step: key into P, then P and S re-encrypted, mixing in the salt words when given. */
  expand(keyWords: Uint32Array, saltWords?: Uint32Array): void {
    const p = this.p
    for (let i = 0; i < 18; i++) p[i] = p[i]! ^ keyWords[i]!
    const lr = new Uint32Array(2)
    let j = 0
    const mix = (table: Uint32Array): void => {
      for (let i = 0; i < table.length; i += 2) {
        if (saltWords) {
          lr[0] = lr[0]! ^ saltWords[j]!
          lr[1] = lr[1]! ^ saltWords[j + 1]!
          j ^= 2 // the 16-byte salt is four words, taken two at a time in turn
        }
        this.encrypt(lr)
        table[i] = lr[0]!
        table[i + 1] = lr[1]!
      }
    }
    mix(p)
    mix(this.s)
  }
}

/** `count` big-endian words read cyclically from the bytes, as the Blowfish key schedule reads its key. */
function cyclicWords(bytes: Buffer, count: number): Uint32Array {
  const out = new Uint32Array(count)
  let off = 0
  for (let i = 0; i < count; i++) {
    let w = 0
    for (let b = 0; b < 4; b++) {
      w = ((w << 8) | bytes[off]!) >>> 0
      off = (off + 1) % bytes.length
    }
    out[i] = w
  }
  return out
}

function encodeBase64(bytes: Buffer): string {
  let out = ''
  for (let i = 0; i < bytes.length; i += 3) {
    const b0 = bytes[i]!
    const b1 = i + 1 < bytes.length ? bytes[i + 1]! : 0
    const b2 = i + 2 < bytes.length ? bytes[i + 2]! : 0
    out += BCRYPT_ALPHABET[b0 >> 2]! + BCRYPT_ALPHABET[((b0 & 0x03) << 4) | (b1 >> 4)]!
    if (i + 1 < bytes.length) out += BCRYPT_ALPHABET[((b1 & 0x0f) << 2) | (b2 >> 6)]!
    if (i + 2 < bytes.length) out += BCRYPT_ALPHABET[b2 & 0x3f]!
  }
  return out
}

function decodeBase64(text: string, length: number): Buffer {
  const values = [...text].map((c) => {
    const v = BCRYPT_ALPHABET.indexOf(c)
    if (v < 0) throw new IchorError(`not a bcrypt base64 character: ${JSON.stringify(c)}`)
    return v
  })
  const out: number[] = []
  for (let i = 0; i < values.length && out.length < length; i += 4) {
    const [c0 = 0, c1 = 0, c2 = 0, c3 = 0] = values.slice(i, i + 4)
    out.push(((c0 << 2) | (c1 >> 4)) & 0xff)
    if (out.length < length) out.push(((c1 << 4) | (c2 >> 2)) & 0xff)
    if (out.length < length) out.push(((c2 << 6) | c3) & 0xff)
  }
  return Buffer.from(out)
}

/**
 * `$2b$<cost>$<salt><hash>` for a password and a 16-byte salt. The password is taken as
 * UTF-8 plus a NUL, cut at 72 bytes, as every $2b$ implementation does.
 */
export function bcryptHash(password: string, salt: Buffer, cost = 10): string {
  if (salt.length !== 16) throw new IchorError(`bcrypt needs a 16-byte salt, got ${salt.length}`)
  if (!Number.isInteger(cost) || cost < 4 || cost > 31) throw new IchorError(`bcrypt cost must be an integer from 4 to 31, got ${cost}`)
  return `$2b$${String(cost).padStart(2, '0')}$${encodeBase64(salt)}${encodeBase64(bcryptRaw(password, salt, cost))}`
}

function bcryptRaw(password: string, salt: Buffer, cost: number): Buffer {
  const key = cyclicWords(Buffer.concat([Buffer.from(password, 'utf8'), Buffer.from([0])]).subarray(0, 72), 18)
  const saltAsKey = cyclicWords(salt, 18)
  const saltWords = cyclicWords(salt, 4)
  const bf = new Blowfish()
  bf.expand(key, saltWords)
  for (let round = 0; round < 2 ** cost; round++) {
    bf.expand(key)
    bf.expand(saltAsKey)
  }
  const text = new Uint32Array(6)
  for (let i = 0; i < 6; i++) text[i] = MAGIC.readUInt32BE(i * 4)
  const pair = new Uint32Array(2)
  for (let block = 0; block < 6; block += 2) {
    pair[0] = text[block]!
    pair[1] = text[block + 1]!
    for (let i = 0; i < 64; i++) bf.encrypt(pair)
    text[block] = pair[0]!
    text[block + 1] = pair[1]!
  }
  const out = Buffer.alloc(24)
  for (let i = 0; i < 6; i++) out.writeUInt32BE(text[i]!, i * 4)
  return out.subarray(0, 23) // bcrypt keeps 23 of the 24 bytes
}

/** Whether `password` matches a `$2a$`/`$2b$`/`$2y$` hash (the three differ only in old implementation bugs). */
export function bcryptVerify(password: string, hash: string): boolean {
  const m = /^\$2[aby]\$(\d\d)\$([./A-Za-z0-9]{22})([./A-Za-z0-9]{31})$/.exec(hash)
  if (!m) throw new IchorError('not a bcrypt hash ($2a$/$2b$/$2y$, cost, 22 salt and 31 hash characters)')
  const salt = decodeBase64(m[2]!, 16)
  const expected = encodeBase64(bcryptRaw(password, salt, Number(m[1])))
  return expected === m[3]
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
