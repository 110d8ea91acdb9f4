// Asking before a change: a real run on a terminal asks unless --yes; a dry run, --json or
// no terminal never asks (commands that change nodes refuse the last without --yes, see
// requireConsent).
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {canPrompt, confirm} from '../init/prompts.js'

export interface ConsentFlags {
  yes: boolean
  dryRun: boolean
  json: boolean
}

export function asksForConfirmation(o: ConsentFlags, tty: boolean = canPrompt()): boolean {
  return tty && !o.yes && !o.dryRun && !o.json
}

/** Asks when `asksForConfirmation`; a "no" is "aborted: nothing was changed" (exit 1). */
export async function confirmOrAbort(o: ConsentFlags, question: string): Promise<void> {
  if (!asksForConfirmation(o)) return
  if (!(await confirm(question))) throw new IchorError('aborted: nothing was changed', {exitCode: EXIT.failed})
}
