import {defineConfig} from 'vitest/config'
import {testHelmPath} from './test/harness/helm.js'

// Two projects: `unit` (offline, real helm and real upstream charts) and `e2e`
// (the harness: real kube-apiserver/etcd, real registry, simulated Talos nodes).
// `npm test` runs both.
//
// They run side by side: each pool is one queue of workers for the whole run (its size comes
// from the root options, not a project's), and vitest starts different pools at the same time.
// So e2e, which mostly waits on the apiserver and the CLI it spawns, has the `threads` pool to
// itself (ICHOR_E2E_WORKERS files at a time, below), while the CPU-bound unit files
// keep the `forks` pool (some change the process's cwd or umask, which a worker thread cannot).
// ICHOR_E2E_WORKERS: how many e2e files run at once, default 2. Each file runs on clusters of its
// own (a converged cluster is a restored copy, test/harness/converged.ts), and one e2e file leaves
// about half of this 2-core machine idle once the unit files are done. Files do not see each
// other's helms either: ichor knows the helm it started by a token of that process alone
// (helm/local-helms.ts), not by the release's name, which another file's cluster shares.
const e2eWorkers = Math.max(1, Number(process.env.ICHOR_E2E_WORKERS ?? 2) || 2)

export default defineConfig({
  test: {
    // Tests run the real Helm 4 release scripts/get-helm.sh pins (cached outside the repo; the
    // helm e2e tests also run Helm 3), on every render (the render cache is tested on its own).
    env: {ICHOR_HELM: testHelmPath(4), ICHOR_RENDER_CACHE: 'off'},
    testTimeout: 120_000,
    hookTimeout: 300_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
    poolOptions: {threads: {maxThreads: e2eWorkers, minThreads: 1}},
    projects: [
      {extends: true, test: {name: 'unit', pool: 'forks', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**']}},
      {
        extends: true,
        // converged-setup: the run's folder of saved converged clusters (test/harness/converged.ts).
        test: {
          name: 'e2e',
          pool: 'threads',
          include: ['test/e2e/**/*.test.ts'],
          fileParallelism: e2eWorkers > 1,
          globalSetup: ['./test/support/converged-setup.ts'],
        },
      },
    ],
  },
})
