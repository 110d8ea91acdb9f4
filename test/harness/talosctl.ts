// The real talosctl's offline commands, built from Go modules by scripts/build-talosctl.sh
// (cached), for `gen`, `validate` and `machineconfig patch` in every test that generates Talos configs.
// ICHOR_REAL_TALOSCTL points at another binary. A failed build fails the test loudly.
import {execFileSync} from 'node:child_process'
import {join} from 'node:path'
import {PROJECT_ROOT} from '../support/upstream.js'

let located: string | undefined

export function realTalosctlPath(): string {
  located ??=
    process.env.ICHOR_REAL_TALOSCTL ||
    execFileSync('bash', [join(PROJECT_ROOT, 'scripts', 'build-talosctl.sh')], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']}).trim()
  return located
}
