// Rewrites the sha256 that assets/compatibility.json claims for its data, after an edit
// (`node scripts/compatibility-hash.mjs [--bump]`; --bump also raises its revision, which a
// copy published for `ichor assets fetch --from DIR` needs to replace an older one).
import {createHash} from 'node:crypto'
import {readFileSync, writeFileSync} from 'node:fs'

const path = new URL('../assets/compatibility.json', import.meta.url)
const file = JSON.parse(readFileSync(path, 'utf8'))
if (process.argv.includes('--bump')) file.revision += 1
file.sha256 = createHash('sha256').update(JSON.stringify(file.data)).digest('hex')
writeFileSync(path, JSON.stringify(file, null, 2) + '\n')
console.log(`assets/compatibility.json: revision ${file.revision}, sha256 ${file.sha256}`)
