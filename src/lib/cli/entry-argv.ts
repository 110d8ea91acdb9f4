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

/** What oclif's loaded Config answers about an id (`cni:values`). */
export interface TopicCatalog {
  findCommand(id: string): unknown
  findTopic(id: string): unknown
}

/**
 * The first flag given to a topic (`ichor cni --foo`), which oclif would ignore and answer with
 * the topic's help and exit 0 (@oclif/core 4.14 lib/main.js run): a script's typo would pass.
 * kubectl refuses a flag its command group does not know; so does ichor (exit 2). `-h`/`--help`
 * still show the help.
 */
export function flagGivenToTopic(argv: readonly string[], catalog: TopicCatalog): {topic: string; flag: string} | undefined {
  const words: string[] = []
  for (const arg of argv) {
    if (arg.startsWith('-')) break
    words.push(arg)
  }
  const id = words.join(':')
  if (words.length === 0 || words[0] === 'help' || catalog.findCommand(id) || !catalog.findTopic(id)) return undefined
  const flag = argv.slice(words.length).find((a) => a !== '-h' && a !== '--help' && a !== '--')
  if (flag === undefined || argv.slice(words.length).some((a) => a === '-h' || a === '--help')) return undefined
  return {topic: words.join(' '), flag: flag.split('=')[0]!}
}
