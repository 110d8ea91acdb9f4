// Start-up time of the CLI: `ichor --help` and `ichor version` (goal <= 250 ms median each),
// beside a bare `node -e 0` so a loaded machine shows in the numbers.
import {fmtMs, median, wall} from './lib.mjs'

export async function run(ctx) {
  const runs = 15
  const baseline = wall(['-e', '0'], runs)
  console.log(`\`node -e 0\` (${runs} runs): median ${fmtMs(median(baseline))}, min ${fmtMs(Math.min(...baseline))}   (the machine's floor)`)
  for (const args of [['--help'], ['version'], ['version', '--json']]) {
    const times = wall([ctx.bin, ...args], runs)
    console.log(`\`ichor ${args.join(' ')}\` (${runs} runs): median ${fmtMs(median(times))}, min ${fmtMs(Math.min(...times))}   goal <= 250 ms`)
  }
}
