// Hostile and large values files: how fast a verdict comes (issue: size checked before
// parsing, linear duplicate-key check, alias bombs). Goal: a 64 KiB file validated and a
// 10 MB file refused in at most 1 s each.
import {spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

/** A 64 KiB file shaped like a documented one: a comment above each key. */
function documentedValues(bytes) {
  let text = 'hubble:\n  relay:\n    enabled: true\npodAnnotations:\n'
  for (let i = 0; text.length < bytes; i++) {
    text += `  # team ${i} owns this workload; ask them before changing it (ticket NET-${1000 + i})\n  example.com/team-${i}: "net-${i}"\n`
  }
  return text.slice(0, text.lastIndexOf('\n  #') + 1)
}

function timed(runs, fn) {
  const times = []
  let result
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    result = fn()
    times.push(performance.now() - t)
  }
  return {times, result}
}

function verdict(fn) {
  try {
    return fn()
  } catch (error) {
    return `refused: ${String(error.message).split('\n')[0].slice(0, 160)}`
  }
}

export async function run(ctx) {
  const {readValuesFile} = await import(join(ctx.root, 'dist', 'lib', 'values', 'input.js'))
  const {checkCiliumValues} = await import(join(ctx.root, 'dist', 'lib', 'cilium', 'validate.js'))
  const dir = mkdtempSync(join(tmpdir(), 'ichor-bench-input-'))
  const chartPath = join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz')
  const facts = {kubeProxy: 'replaced', tunnel: 'vxlan'}
  try {
    checkCiliumValues({chartPath, user: {}, facts}) // chart read and key tree, once per process

    const f64 = join(dir, 'values-64k.yaml')
    writeFileSync(f64, documentedValues(64 * 1024))
    const v64 = timed(5, () => {
      const user = readValuesFile(f64, '--cilium-values')
      return checkCiliumValues({chartPath, user, facts}).issues
    })
    const issues = v64.result
    console.log(
      `64 KiB values file (${Object.keys(readValuesFile(f64).podAnnotations).length} keys, commented): read + parse + full validation, no helm render (5 runs): median ${fmtMs(median(v64.times))}, max ${fmtMs(Math.max(...v64.times))}; ${issues.length === 0 ? 'valid' : `${issues.length} issue(s): ${issues[0].message.slice(0, 80)}`}   goal <= 1 s`,
    )

    const f10 = join(dir, 'values-10m.yaml')
    writeFileSync(f10, 'podAnnotations:\n' + '  k: v\n'.repeat((10 * 1024 * 1024) / 7))
    const r10 = timed(5, () => verdict(() => readValuesFile(f10, '--cilium-values')))
    console.log(
      `10 MB values file refused (5 runs): median ${fmtMs(median(r10.times))}, max ${fmtMs(Math.max(...r10.times))}; ${r10.result.replace(dir, '…')}   goal <= 1 s`,
    )

    // The worst a file under the cap can do to the duplicate-key check: as many keys as fit.
    let keys = ''
    for (let i = 0; keys.length < 250 * 1024; i++) keys += `k${i.toString(36)}: 1\n`
    const fKeys = join(dir, 'values-keys.yaml')
    writeFileSync(fKeys, keys)
    const rk = timed(3, () => verdict(() => Object.keys(readValuesFile(fKeys)).length))
    console.log(
      `250 KiB file of ${keys.split('\n').length - 1} distinct keys, read + parse + duplicate-key check (3 runs): median ${fmtMs(median(rk.times))}   (was quadratic: 40k keys took 14-20 s)`,
    )

    let bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for (let i = 1; i < 10; i++)
      bomb += `${'abcdefghij'[i]}: &${'abcdefghij'[i]} [${Array(9)
        .fill(`*${'abcdefghij'[i - 1]}`)
        .join(',')}]\n`
    const fBomb = join(dir, 'bomb.yaml')
    writeFileSync(fBomb, bomb)
    const rb = timed(5, () => verdict(() => readValuesFile(fBomb, '--cilium-values')))
    console.log(`billion-laughs alias bomb (5 runs): median ${fmtMs(median(rb.times))}; ${rb.result.replace(dir, '…')}`)

    const cli = timed(3, () => spawnSync(process.execPath, [ctx.bin, 'cni', 'values', 'validate', '--cilium-chart', chartPath, '-f', f10], {encoding: 'utf8'}))
    console.log(
      `\`ichor cni values validate -f <10 MB file>\` wall time incl. CLI start (3 runs): median ${fmtMs(median(cli.times))}, exit ${cli.result.status}`,
    )
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}
