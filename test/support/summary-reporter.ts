// Prints each test file's wall time, slowest first (where CI time goes), then the plain
// closing line "tests: N passed, N failed" that CI reads in any language.
import {relative} from 'node:path'
import type {Reporter, TestModule} from 'vitest/node'

export interface FileTime {
  project: string
  file: string
  ms: number
}

/** "  893 s  e2e   test/e2e/init-kill.test.ts", slowest first, then the sum per project. */
export function fileTimeLines(files: FileTime[]): string[] {
  const seconds = (ms: number) => `${Math.round(ms / 1000)} s`.padStart(7)
  const width = Math.max(0, ...files.map((f) => f.project.length))
  const lines = [...files].sort((a, b) => b.ms - a.ms || a.file.localeCompare(b.file)).map((f) => `${seconds(f.ms)}  ${f.project.padEnd(width)}  ${f.file}`)
  const projects = [...new Set(files.map((f) => f.project))].sort()
  const sums = projects.map((p) => `${p} ${Math.round(files.filter((f) => f.project === p).reduce((s, f) => s + f.ms, 0) / 1000)} s`)
  return ['time per test file:', ...lines, `sum per project: ${sums.join(', ')}`]
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state
        if (state === 'passed') passed++
        else if (state === 'failed') failed++
        else skipped++
      }
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++
    }
    const times = testModules.map((mod) => ({project: mod.project.name, file: relative(process.cwd(), mod.moduleId), ms: mod.diagnostic().duration}))
    if (times.length > 1) process.stdout.write(`\n${fileTimeLines(times).join('\n')}\n`)
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`)
  }
}
