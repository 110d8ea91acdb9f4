// The argv both entry points (bin/run.js, the single binary's build/sea-entry.cjs) give oclif.
// No imports: it is loaded on every start.

/**
 * `--version` is `ichor version` (oclif's own prints only the CLI's user agent), and `k8s` is the
 * `kubernetes` topic as kubectl users write it: `ichor k8s` lists the topic's commands as `ichor
 * kubernetes` does, where oclif knows `k8s` only as the alias of one command (`k8s upgrade`).
 */
export function entryArgv(argv: readonly string[]): string[] {
  if (argv[0] === '--version') return ['version', ...argv.slice(1)]
  if (argv[0] === 'k8s') return ['kubernetes', ...argv.slice(1)]
  return [...argv]
}
