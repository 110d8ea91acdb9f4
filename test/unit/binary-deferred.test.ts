// build/deferred.cjs: the stand-in the single binary's startup snapshot gets for a module
// that must load when the process starts (scripts/build-binary.mjs). It loads the module
// on first use, not before, and then behaves as the module does.
import {createRequire} from 'node:module'
import {describe, expect, it} from 'vitest'

type Deferred = (load: () => unknown, name: string, esModule: boolean) => any
const deferred = createRequire(import.meta.url)('../../build/deferred.cjs') as Deferred

describe('the binary startup snapshot stand-in (build/deferred.cjs)', () => {
  it('answers the interop helpers’ __esModule without loading the module, and loads it on first real use', () => {
    let loads = 0
    const mod = deferred(
      () => {
        loads++
        return {width: 60, bold: (s: string) => `*${s}*`}
      },
      'screen',
      true,
    )
    expect(mod.__esModule).toBe(true)
    expect(loads).toBe(0)
    expect(mod.width).toBe(60)
    expect(mod.bold('x')).toBe('*x*')
    expect('width' in mod).toBe(true)
    expect(Object.keys(mod)).toEqual(['width', 'bold'])
    mod.width = 100
    expect(mod.width).toBe(100)
    expect(loads).toBe(1)
  })

  it('calls through to a module that exports a function (clean-stack)', () => {
    const fn = deferred(() => (stack: string) => stack.toUpperCase(), 'clean-stack', false)
    expect(fn.__esModule).toBe(false)
    expect(fn('at x')).toBe('AT X')
  })
})
