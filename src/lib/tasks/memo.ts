// The one memo of a command's reads. Callers share one promise, while it runs and once it
// resolved; a rejection reaches every caller that shared it and is then forgotten, so the
// next call tries again. Why forget: a step's probe, run and second probe all read through
// these memos, and a transient failure (a dropped connection, a tunnel that closed) must not
// be replayed to every later read of the run; a value, once read, is what the plan decided on.
export interface Once<T> {
  (): Promise<T>
  /** Drops what is held (a step changed what was read); returns the promise it held, if any. */
  forget(): Promise<T> | undefined
  /** Whether a call is running or its value is held (nothing is started). */
  held(): boolean
}

export function once<T>(fn: () => Promise<T>): Once<T> {
  let held: Promise<T> | undefined
  const get = (): Promise<T> => {
    if (held) return held
    let p: Promise<T>
    try {
      p = fn()
    } catch (error) {
      p = Promise.reject(error)
    }
    held = p
    // Only this promise is forgotten: a later one (after forget()) stays.
    p.catch(() => {
      if (held === p) held = undefined
    })
    return p
  }
  return Object.assign(get, {
    held: () => held !== undefined,
    forget(): Promise<T> | undefined {
      const was = held
      held = undefined
      return was
    },
  })
}
