// What `npm run build:binary` says on success: a few lines, while everything the bundler
// (esbuild), `node --experimental-sea-config` and postject print goes to a log beside the
// binary. On a good build that output is warnings Node and postject always give (snapshot
// support of built-in modules, SEA being experimental, ELF note sections): counted, not shown.

/** Warnings in captured output: Node's process warnings, postject's, plus the bundler's count. */
export function countWarnings(captured, bundlerWarnings) {
  const lines = captured.split(/\r?\n/)
  const node = lines.filter((l) => /^\(node:\d+\) \w*Warning: /.test(l)).length
  const postject = lines.filter((l) => /^warning: /.test(l)).length
  return node + postject + bundlerWarnings
}

/** The summary lines (2-3): the binary, its size, node version and pinning; the warnings and the log. */
export function binarySummary({out, bytes, node, notPinned, warnings, log}) {
  const pinning = notPinned.length === 0 ? 'all artifacts pinned' : `NOT all pinned: ${notPinned.join(', ')}`
  const said = warnings === 0 ? 'no warnings' : `${warnings} warning${warnings === 1 ? '' : 's'} (known ones on a good build)`
  return [`build-binary: ${out}: ${(bytes / 1e6).toFixed(1)} MB, node ${node}, ${pinning}`, `build-binary: ${said}; the full log: ${log}`]
}
