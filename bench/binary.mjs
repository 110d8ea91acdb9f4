// Start-up of the single binary (`npm run build:binary`, out/ichor) against the npm build:
// `ichor --help` median of each (goal: the binary <= 150 ms and faster than
// `node bin/run.js --help`), beside a bare `node -e 0` so a loaded machine shows in the
// numbers. The runs alternate so a change in the machine's load hits both alike.
import {spawnSync} from 'node:child_process'
import {existsSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {fmtMB, fmtMs, median} from './lib.mjs'

function once(file, args) {
  const t = performance.now()
  const r = spawnSync(file, args, {encoding: 'utf8'})
  const ms = performance.now() - t
  if (r.status !== 0) throw new Error(`bench: ${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  return ms
}

export async function run(ctx) {
  const binary = process.env.ICHOR_BINARY ?? join(ctx.root, 'out', 'ichor')
  if (!existsSync(binary)) {
    console.log(`no single binary at ${binary}: run \`npm run build:binary\` first (or set ICHOR_BINARY)`)
    return
  }
  const runs = 21
  const times = {floor: [], binary: [], npm: []}
  // One untimed run of each warms the page cache (the binary is 100 MB).
  once(binary, ['--help'])
  once(process.execPath, [ctx.bin, '--help'])
  for (let i = 0; i < runs; i++) {
    times.floor.push(once(process.execPath, ['-e', '0']))
    times.binary.push(once(binary, ['--help']))
    times.npm.push(once(process.execPath, [ctx.bin, '--help']))
  }
  const line = (label, xs, goal = '') => console.log(`${label} (${runs} runs): median ${fmtMs(median(xs))}, min ${fmtMs(Math.min(...xs))}${goal}`)
  console.log(`binary ${binary}: ${fmtMB(statSync(binary).size)}`)
  line('`node -e 0`                ', times.floor, '   (the machine\'s floor)')
  line('`out/ichor --help`         ', times.binary, '   goal <= 150 ms, faster than the npm build')
  line('`node bin/run.js --help`   ', times.npm)
  console.log(`binary / npm median: ${(median(times.binary) / median(times.npm)).toFixed(2)}`)
}
