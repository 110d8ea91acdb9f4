// Which pinned artifacts this build's tests ran, said plainly: the test mirror holds Cilium's
// pinned chart exactly, but older Argo CD and Kokumi than the pins (assets/lock.json `tested`).
import {ASSET_IDS, pinnedAssets, type AssetId} from '../assets/lock.js'

export interface TestedArtifact {
  id: AssetId
  pinned: string
  /** The pinned version itself was tested. */
  pinTested: boolean
  testedVersions: string[]
  how: string
}

export function testedArtifacts(): TestedArtifact[] {
  const pins = pinnedAssets()
  return ASSET_IDS.map((id) => {
    const pin = pins[id]
    const versions = pin.tested?.versions ?? []
    return {id, pinned: pin.version, pinTested: versions.includes(pin.version), testedVersions: versions, how: pin.tested?.how ?? 'not recorded'}
  })
}
