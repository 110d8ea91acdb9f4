import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {
  defaultKubernetesVersion,
  DEFAULT_TALOS_VERSION,
  hasMultidocHostDNSConfig,
  hasMultidocKubernetesConfig,
  parseKubernetesVersion,
  parseTalosVersion,
  requireCompatibleKubernetesVersion,
  requireSupportedTalosVersion,
  SUPPORTED_TALOS,
} from '../../src/lib/talos/versions.js'
import {kubernetesRangeOfTalos} from '../../src/lib/compatibility/queries.js'

function thrown(fn: () => unknown): IchorError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(IchorError)
    return error as IchorError
  }
  throw new Error('expected an IchorError')
}

describe('parseTalosVersion', () => {
  it('accepts v1.14.3 and 1.14.3 as the same canonical tag', () => {
    expect(parseTalosVersion('v1.14.3')).toEqual({major: 1, minor: 14, patch: 3, tag: 'v1.14.3'})
    expect(parseTalosVersion('1.14.3')).toEqual({major: 1, minor: 14, patch: 3, tag: 'v1.14.3'})
  })

  it.each(['1.14', 'v1.14', 'latest', '', 'v1.14.3-rc.1', 'V1.14.3', '1.14.x', '01.14.3', 'v1.14.3 extra'])(
    'refuses %j naming --talos-version and the accepted form, exit code 2',
    (input) => {
      const error = thrown(() => parseTalosVersion(input))
      expect(error.message).toContain('--talos-version')
      expect(error.message).toContain('vMAJOR.MINOR.PATCH')
      expect(error.exitCode).toBe(2)
    },
  )

  it('the default is a parseable v1.14 release', () => {
    const v = parseTalosVersion(DEFAULT_TALOS_VERSION)
    expect([v.major, v.minor]).toEqual([1, 14])
    expect(v.tag).toBe(DEFAULT_TALOS_VERSION)
  })
})

describe('parseKubernetesVersion', () => {
  it('accepts 1.36.2 and v1.36.2, canonical without the v', () => {
    expect(parseKubernetesVersion('1.36.2').version).toBe('1.36.2')
    expect(parseKubernetesVersion('v1.36.2').version).toBe('1.36.2')
    expect(parseKubernetesVersion(defaultKubernetesVersion()).version).toBe(defaultKubernetesVersion())
  })

  it('refuses a partial version naming --kubernetes-version', () => {
    const error = thrown(() => parseKubernetesVersion('1.36'))
    expect(error.message).toContain('--kubernetes-version')
    expect(error.message).toContain('MAJOR.MINOR.PATCH')
    expect(error.exitCode).toBe(2)
  })
})

describe('config contract facts', () => {
  it.each([
    ['v1.10.0', false],
    ['v1.13.9', false],
    ['v1.14.0', true],
    ['v1.14.1', true],
    ['v2.0.0', true],
  ])('hasMultidocKubernetesConfig(%s) is %s', (version, expected) => {
    expect(hasMultidocKubernetesConfig(version)).toBe(expected)
    expect(hasMultidocHostDNSConfig(version)).toBe(expected)
  })
})

describe('requireSupportedTalosVersion', () => {
  it('accepts the oldest supported, the default and any v1.14 patch', () => {
    expect(requireSupportedTalosVersion(SUPPORTED_TALOS.oldest).tag).toBe('v1.10.0')
    expect(requireSupportedTalosVersion(DEFAULT_TALOS_VERSION).tag).toBe(DEFAULT_TALOS_VERSION)
    expect(requireSupportedTalosVersion('1.14.9').tag).toBe('v1.14.9')
  })

  it.each(['v1.9.6', 'v1.15.0', 'v2.0.0'])('refuses %s with the supported range', (version) => {
    const error = thrown(() => requireSupportedTalosVersion(version))
    expect(error.message).toContain('--talos-version')
    expect(error.message).toContain(`${SUPPORTED_TALOS.oldest} to ${SUPPORTED_TALOS.newestMinor}.x`)
    expect(error.exitCode).toBe(2)
  })
})

describe('requireCompatibleKubernetesVersion', () => {
  it('accepts the default pair and the edges of a range', () => {
    expect(requireCompatibleKubernetesVersion(DEFAULT_TALOS_VERSION, defaultKubernetesVersion()).version).toBe(defaultKubernetesVersion())
    expect(requireCompatibleKubernetesVersion('v1.13.9', 'v1.31.0').version).toBe('1.31.0')
    expect(requireCompatibleKubernetesVersion('v1.13.9', '1.36.7').version).toBe('1.36.7')
  })

  it.each([
    ['v1.13.9', '1.37.0', '1.31.0 to 1.36.x'],
    ['v1.14.1', '1.31.9', '1.32.0 to 1.37.x'],
    ['v1.10.0', '1.34.0', '1.28.0 to 1.33.x'],
  ])('Talos %s refuses Kubernetes %s (accepted %s)', (talos, k8s, range) => {
    const error = thrown(() => requireCompatibleKubernetesVersion(talos, k8s))
    expect(error.message).toContain('--kubernetes-version')
    expect(error.message).toContain(range)
    expect(error.exitCode).toBe(2)
  })

  it('has a range for every supported Talos minor', () => {
    for (let minor = 10; minor <= 14; minor++) expect(kubernetesRangeOfTalos(`1.${minor}`)).toBeDefined()
  })
})
