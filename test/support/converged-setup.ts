// The e2e project's global setup: one folder per run for the converged clusters that
// test/harness/converged.ts makes on first use and restores for each file; removed when the run ends.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {TestProject} from 'vitest/node'

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-converged-'))
  project.provide('convergedDir', dir)
  return () => rmSync(dir, {recursive: true, force: true})
}
