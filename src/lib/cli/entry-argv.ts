// The argv both entry points (bin/run.js, the single binary's build/sea-entry.cjs) give oclif.
// No imports: it is loaded on every start.

/** `--version` is `ichor version` (oclif's own prints only the CLI's user agent). */
export function entryArgv(argv: readonly string[]): string[] {
  return argv[0] === '--version' ? ['version', ...argv.slice(1)] : [...argv]
}
