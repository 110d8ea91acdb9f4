import {defineConfig} from 'vitest/config'
import {testHelmPath} from './test/harness/helm.js'

// Two projects: `unit` (offline, real helm and real upstream charts) and `e2e`
// (the harness: real kube-apiserver/etcd, real registry, simulated Talos nodes).
// `npm test` runs both.
export default defineConfig({
  test: {
    // Tests run the real Helm 4 built from Go modules (scripts/build-helm.sh, cached; the
    // helm e2e tests also run Helm 3), on every render (the render cache is tested on its own).
    env: {ICHOR_HELM: testHelmPath(4), ICHOR_RENDER_CACHE: 'off'},
    testTimeout: 120_000,
    hookTimeout: 300_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      {extends: true, test: {name: 'unit', include: ['test/**/*.test.ts'], exclude: ['test/e2e/**']}},
      {extends: true, test: {name: 'e2e', include: ['test/e2e/**/*.test.ts'], fileParallelism: false}},
    ],
  },
})
