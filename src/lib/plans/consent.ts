// The one confirmation rule for every command that changes a cluster (README "Conventions"):
// a real run (not --dry-run) asks on a terminal unless --yes; without a terminal, or with
// --json (which never prompts), it is refused with exit 2 naming --yes, before any connection.
// "No" at the prompt is "aborted: nothing was changed", exit 1; Ctrl-C there is exit 130
// (cli/error-report.ts). The plan runner (run.ts) is its one caller for plans.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export interface ConsentFlags {
  /** The command as the operator typed it (`stack sync`), named in the refusal. */
  command: string
  yes: boolean
  dryRun: boolean
  json: boolean
}

/** Is there a terminal to ask on (stdin and stdout both)? */
export function canPrompt(): boolean {
  return Boolean(process.stdin.isTTY && process.stdout.isTTY)
}

/**
 * Whether the run must ask before it changes anything: 'ask' for a real run on a terminal
 * without --yes, 'no' for a dry run or --yes. Throws the exit-2 refusal naming --yes when
 * it would have to ask and cannot (no terminal, or --json). Call it before any connection.
 */
export function consentNeeded(o: ConsentFlags, tty: boolean = canPrompt()): 'ask' | 'no' {
  if (o.dryRun || o.yes) return 'no'
  if (tty && !o.json) return 'ask'
  const why = o.json ? 'with --json nothing is asked' : 'there is no terminal to confirm on'
  throw new IchorError(`ichor ${o.command} changes the cluster and ${why}: pass --yes (-y) to run it`, {
    exitCode: EXIT.usage,
    hint: 'or run it on a terminal to be asked; --dry-run shows what would change',
  })
}

/** Asks `question`; a "no" is "aborted: nothing was changed" (exit 1). */
export async function confirmOrAbort(question: string, ask: (question: string) => Promise<boolean> = confirm): Promise<void> {
  if (!(await ask(question))) throw new IchorError('aborted: nothing was changed', {exitCode: EXIT.failed})
}

export async function confirm(message: string, opts: {default?: boolean} = {}): Promise<boolean> {
  const prompts = await import('@inquirer/prompts')
  return prompts.confirm({message, default: opts.default ?? true})
}
