// Unified text diffs from jsdiff (the `diff` package), and their colouring for a terminal:
// shared by every command that shows a change before making it (cni, stack values, Talos configs).
import {createTwoFilesPatch, FILE_HEADERS_ONLY} from 'diff'
import {wantsColour} from '../log/colour.js'

/** `---`/`+++` labels, then hunks with three lines of context, as `diff -u` prints them; '' when equal. */
export function unifiedDiff(before: string, after: string, labels: [string, string]): string {
  if (before === after) return ''
  return createTwoFilesPatch(labels[0], labels[1], before, after, undefined, undefined, {context: 3, headerOptions: FILE_HEADERS_ONLY})
}

/** Red removals, green additions, cyan hunk headers, bold file labels (for a terminal). */
export function colourDiff(text: string): string {
  return text
    .split('\n')
    .map((l) =>
      l.startsWith('+++') || l.startsWith('---')
        ? `\u001B[1m${l}\u001B[0m`
        : l.startsWith('+')
          ? `\u001B[32m${l}\u001B[0m`
          : l.startsWith('-')
            ? `\u001B[31m${l}\u001B[0m`
            : l.startsWith('@@')
              ? `\u001B[36m${l}\u001B[0m`
              : l,
    )
    .join('\n')
}

/** The diff as it should reach `stream`: coloured when `wantsColour` (log/colour.ts), untouched otherwise; every diff printer uses it. */
export function paintDiff(text: string, stream: {isTTY?: boolean} = process.stdout, env: NodeJS.ProcessEnv = process.env): string {
  return wantsColour(stream, env) ? colourDiff(text) : text
}
