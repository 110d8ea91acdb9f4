// Child process of the determinism test: prints the bundle of FIXED_FILES as JSON.
import {buildBundle} from '../../../src/lib/oci/bundle.js'
import {FIXED_FILES} from './bundle-input.js'

const {layer, layerDigest, size} = buildBundle(FIXED_FILES)
process.stdout.write(JSON.stringify({layer: layer.toString('base64'), layerDigest, size}))
