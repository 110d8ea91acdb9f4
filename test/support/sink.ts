// A writable stream that keeps what is written, for tests of what a printer writes.
import {Writable} from 'node:stream'

export function sink(): Writable & {text: () => string} {
  const chunks: string[] = []
  const w = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk))
      done()
    },
  }) as Writable & {text: () => string}
  w.text = () => chunks.join('')
  return w
}
