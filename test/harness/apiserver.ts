// A real Kubernetes control plane for the e2e tests: etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler, all built from the one k8s.io/kubernetes module by scripts/build-envtest.sh
// (as controller-runtime's envtest does for the first two), on loopback ports, with throwaway
// state. The controllers are real: ServiceAccounts and kube-root-ca.crt in every namespace,
// Deployments -> ReplicaSets -> Pods, DaemonSets, StatefulSets, Jobs, garbage collection and
// namespace deletion. What it does NOT run is a kubelet: nodes and their pods' status come from
// kwok (./kwok.ts), started beside it by the harness cluster (cluster.ts).
//
// The API server admits pods as a Talos-made one does: Talos configures the PodSecurity admission
// plugin with enforce=baseline (audit and warn restricted) for every namespace but kube-system
// (siderolabs/talos pkg/machinery/config/types/v1alpha1/v1alpha1_provider.go
// APIServerDefaultAdmissionControl at v1.14, the `cluster.apiServer.admissionControl` every
// `talosctl gen config` writes), so a workload that a real Talos cluster refuses is refused here.
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {generateKeyPairSync, randomBytes} from 'node:crypto'
import {cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {request} from 'node:https'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {stringify} from 'yaml'

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)))
const BUILD_SCRIPT = join(REPO_ROOT, 'scripts', 'build-envtest.sh')
const BINARIES = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'etcd', 'etcdutl'] as const
const BUILD_HINT = `build them with: scripts/build-envtest.sh (or point ICHOR_ENVTEST_DIR at a directory holding ${BINARIES.join(', ')})`

export interface ControlPlaneOptions {
  /** Directory with the four binaries; default ICHOR_ENVTEST_DIR, else scripts/build-envtest.sh. */
  binDir?: string
  /** Extra kube-apiserver flags, e.g. `--disable-admission-plugins=ServiceAccount`. */
  apiServerArgs?: string[]
  /** How long to wait for /readyz (default 60 s). */
  startTimeoutMs?: number
  /**
   * Run kube-controller-manager and kube-scheduler too (default true). Only tests of the API
   * server's own behaviour (client, apply, Lease) may leave them out, to start faster.
   */
  controllers?: boolean
  /** The PodSecurity defaults Talos writes (default true); false admits every pod (plain envtest). */
  talosPodSecurity?: boolean
  /**
   * A folder `save()` wrote: start from a copy of its etcd data and the same credentials (serving
   * certificate and CA, admin token, service-account key), so the cluster, its tokens and every
   * kube-root-ca.crt stay valid; only the ports are new. The folder itself is never changed.
   */
  restoreFrom?: string
}

export interface ControlPlane {
  /** Kubeconfig file (context `envtest`, user `admin` in system:masters). */
  kubeconfigPath: string
  /** The same kubeconfig, as YAML text. */
  kubeconfig: string
  /** https://127.0.0.1:<port> */
  server: string
  /** Bearer token of the admin user. */
  token: string
  /** PEM of the CA that signed the serving certificate (also in the kubeconfig). */
  caPem: string
  /** Whether kube-controller-manager and kube-scheduler run. */
  controllers: boolean
  /** The loopback ports in use (apiserver, etcd client, etcd peer), so tests can check they close. */
  ports: {apiServer: number; etcdClient: number; etcdPeer: number}
  /** etcd's client URL (http on loopback). */
  etcdEndpoint: string
  /** The real etcdutl of the same etcd (snapshot status and restore). */
  etcdutl: string
  /** Milliseconds from the call to /readyz answering ok. */
  startMs: number
  /** Kills both processes and removes every temp file. Safe to call twice. */
  stop(): Promise<void>
  /**
   * Stops every process without removing its files, then copies what makes this cluster (etcd's
   * data folder and the credentials) to `dir` for `restoreFrom`, and removes the temp files. The
   * controllers and the API server stop first, so nothing writes while etcd stops; etcd is killed
   * as a crash would, and reopens its data folder as after one (its WAL replays what bbolt had not
   * committed), which is how etcd itself recovers a member.
   */
  save(dir: string): Promise<void>
  /**
   * Every control plane lost at once: the processes are killed and etcd's data is gone. The
   * credentials stay (on a real cluster they come back from the Talos secrets bundle).
   */
  lose(): Promise<void>
  /**
   * After lose(): etcd's data restored from an etcd snapshot file, and the control plane started
   * again on the same ports with the same credentials.
   */
  recover(snapshot: string): Promise<void>
}

/** The leader Leases the controllers take in kube-system (their default --leader-elect-resource-name). */
const CONTROLLER_LEASES = ['kube-controller-manager', 'kube-scheduler']

/** What save() keeps and restoreFrom copies back: etcd's data and the credentials everything in it was made with. */
const SAVED = ['etcd', 'certs', 'tokens.csv', 'sa.key', 'sa.pub'] as const

let located: Promise<string> | undefined

/** The directory holding the envtest binaries; builds them when missing (slow the first time). */
export async function envtestBinDir(explicit?: string): Promise<string> {
  const fromEnv = explicit ?? process.env.ICHOR_ENVTEST_DIR
  if (fromEnv) {
    assertBinaries(fromEnv)
    return fromEnv
  }
  // One build for concurrent callers (two clusters started at once).
  located ??= runBuildScript().then((dir) => {
    assertBinaries(dir)
    return dir
  })
  return located
}

function assertBinaries(dir: string): void {
  for (const bin of BINARIES) {
    if (!existsSync(join(dir, bin))) throw new Error(`envtest: ${join(dir, bin)} is missing; ${BUILD_HINT}`)
  }
}

function runBuildScript(): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    // stderr is passed through: a cold build takes minutes and says so.
    const child = spawn('bash', [BUILD_SCRIPT], {stdio: ['ignore', 'pipe', 'inherit']})
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.on('error', (err) => reject(new Error(`envtest: cannot run ${BUILD_SCRIPT}: ${err.message}`)))
    // 'close', not 'exit': stdout may still hold the directory when the process exits.
    child.on('close', (code) => {
      const dir = out.trim().split('\n').pop() ?? ''
      if (code === 0 && dir) resolvePromise(dir)
      else reject(new Error(`envtest: scripts/build-envtest.sh failed (exit ${code}); ${BINARIES.join(', ')} are required. ${BUILD_HINT}`))
    })
  })
}

/** A free loopback TCP port (the kernel picks it; closed again before use). */
export function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      srv.close(() => (typeof addr === 'object' && addr ? resolvePromise(addr.port) : reject(new Error('no port'))))
    })
  })
}

// Each binary runs under a small bash watchdog that holds a pipe from this process:
// when the pipe closes (stop(), or this process dying in any way, even SIGKILL), the
// watchdog SIGKILLs the binary and removes the temp dir. So a crashed or killed test
// run never leaves an apiserver behind holding ports, memory and disk. A line "keep" on the pipe
// kills the binary and leaves the dir (save()).
const WATCHDOG = `exec 3<&0
"$@" </dev/null &
pid=$!
{ read -r cmd <&3; kill -9 "$pid" 2>/dev/null; [ "$cmd" = keep ] || rm -rf "$ENVTEST_TMP"; } &
watch=$!
wait "$pid"; rc=$?
kill "$watch" 2>/dev/null
exit $rc`

/**
 * The Go garbage collector of the harness's own binaries (apiserver, etcd, controllers, kwok, the
 * registry) runs a quarter as often as by default: the tests are CPU-bound on a 2-core machine and
 * the apiserver spent about a quarter of its CPU on GC (stack-day2.test.ts alone: 47 → 35 CPU
 * seconds with GOGC=400). Memory is plentiful; GOMEMLIMIT keeps a busy one from growing past it.
 * A GOGC or GOMEMLIMIT set in the environment wins.
 */
export const GO_GC_TUNING = {GOGC: process.env.GOGC ?? '400', GOMEMLIMIT: process.env.GOMEMLIMIT ?? '1536MiB'}

export interface Proc {
  child: ChildProcess
  logPath: string
  exited: Promise<number | null>
}

export function startProcess(bin: string, args: string[], tmp: string, logName: string): Proc {
  const logPath = join(tmp, logName)
  const log = createWriteStream(logPath)
  const child = spawn('bash', ['-c', WATCHDOG, 'watchdog', bin, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {...process.env, ...GO_GC_TUNING, ENVTEST_TMP: tmp},
  })
  child.stdout?.pipe(log)
  child.stderr?.pipe(log)
  const exited = new Promise<number | null>((resolvePromise) => {
    child.on('exit', (code) => resolvePromise(code))
    child.on('error', () => resolvePromise(-1))
  })
  return {child, logPath, exited}
}

export async function stopProcess(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return
  // Closing the pipe makes the watchdog SIGKILL the binary (the state is thrown away,
  // so there is nothing to shut down gracefully); the watchdog exits once it is gone.
  proc.child.stdin?.end()
  const killed = await Promise.race([proc.exited.then(() => true), sleep(5000).then(() => false)])
  if (!killed) {
    proc.child.kill('SIGKILL')
    await proc.exited
  }
}

/** Kills the binary and leaves its files (the watchdog reads "keep"), for save(). */
async function killKeepingFiles(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return
  proc.child.stdin?.write('keep\n')
  await proc.exited
}

function logTail(path: string, lines = 30): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}

/** A GET (or `method`) over TLS; without `ca` the server is not verified (only before the CA is known). */
function probe(url: string, token: string, ca?: string, method = 'GET'): Promise<{status: number; body: string}> {
  return new Promise((resolvePromise, reject) => {
    const req = request(url, {method, headers: {Authorization: `Bearer ${token}`}, ca, rejectUnauthorized: Boolean(ca), timeout: 2000}, (res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c.toString()))
      res.on('end', () => resolvePromise({status: res.statusCode ?? 0, body}))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end()
  })
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

export async function waitFor(what: string, proc: Proc, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let exited = false
  void proc.exited.then(() => (exited = true))
  for (;;) {
    if (exited) throw new Error(`envtest: ${what} exited before it was ready:\n${logTail(proc.logPath)}`)
    if (await check().catch(() => false)) return
    if (Date.now() > deadline) throw new Error(`envtest: ${what} not ready after ${timeoutMs} ms:\n${logTail(proc.logPath)}`)
    await sleep(50)
  }
}

/**
 * Starts etcd and kube-apiserver on loopback, waits until /readyz answers ok, then starts
 * kube-controller-manager and kube-scheduler (unless `controllers: false`) and waits until the
 * controllers serve (the `default` ServiceAccount of `default` exists).
 */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const t0 = Date.now()
  const binDir = await envtestBinDir(opts.binDir)
  const timeoutMs = opts.startTimeoutMs ?? 60_000
  const dir = mkdtempSync(join(tmpdir(), 'ichor-envtest-'))
  let procs: Proc[] = []
  let stopped = false
  const stop = async (): Promise<void> => {
    if (stopped) return
    stopped = true
    // apiserver first, so it does not log a storm of etcd errors.
    for (const p of [...procs].reverse()) await stopProcess(p)
    rmSync(dir, {recursive: true, force: true})
  }

  try {
    if (opts.restoreFrom) for (const part of SAVED) cpSync(join(opts.restoreFrom, part), join(dir, part), {recursive: true})
    const [etcdClient, etcdPeer, apiServer] = await distinctFreePorts(3)
    const etcdUrl = `http://127.0.0.1:${etcdClient}`
    const peerUrl = `http://127.0.0.1:${etcdPeer}`
    const runEtcd = () =>
      startProcess(
        join(binDir, 'etcd'),
        [
          '--name=envtest',
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=envtest=${peerUrl}`,
          // Throwaway data: skip fsync, which dominates etcd latency on shared disks.
          '--unsafe-no-fsync=true',
          '--log-level=warn',
        ],
        dir,
        'etcd.log',
      )
    procs.push(runEtcd())

    // Credentials: a static admin token and the service-account signing key (a restored cluster's own).
    let token: string
    if (opts.restoreFrom) {
      token = readFileSync(join(dir, 'tokens.csv'), 'utf8').split(',')[0]!
    } else {
      token = randomBytes(24).toString('hex')
      writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin-uid,"system:masters"\n`, {mode: 0o600})
      const {privateKey, publicKey} = generateKeyPairSync('rsa', {modulusLength: 2048})
      writeFileSync(join(dir, 'sa.key'), privateKey.export({type: 'pkcs1', format: 'pem'}), {mode: 0o600})
      writeFileSync(join(dir, 'sa.pub'), publicKey.export({type: 'spki', format: 'pem'}))
    }

    // The apiserver starts beside etcd and retries until etcd answers; waiting for etcd
    // first would only add latency.
    const certDir = join(dir, 'certs')
    const admission = join(dir, 'admission.yaml')
    writeFileSync(admission, TALOS_ADMISSION_CONFIG)
    const server = `https://127.0.0.1:${apiServer}`
    const runApiserver = async (): Promise<void> => {
      const apiserver = startProcess(
        join(binDir, 'kube-apiserver'),
        [
          `--etcd-servers=${etcdUrl}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--secure-port=${apiServer}`,
          // It generates a self-signed serving cert (and its CA) into this directory.
          `--cert-dir=${certDir}`,
          `--token-auth-file=${join(dir, 'tokens.csv')}`,
          '--authorization-mode=RBAC',
          '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
          `--service-account-key-file=${join(dir, 'sa.pub')}`,
          `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
          '--service-cluster-ip-range=10.96.0.0/16',
          '--allow-privileged=true',
          '--profiling=false',
          // A Node's kubelet (kwok's server, kwok.ts kubeletPortForward) is reached at its InternalIP,
          // 127.0.0.x here: the default tries the Hostname first, which nothing resolves.
          '--kubelet-preferred-address-types=InternalIP',
          ...(opts.talosPodSecurity === false ? [] : [`--admission-control-config-file=${admission}`]),
          ...(opts.apiServerArgs ?? []),
        ],
        dir,
        'kube-apiserver.log',
      )
      procs.push(apiserver)
      await waitFor('kube-apiserver', apiserver, timeoutMs, async () => {
        const res = await probe(`${server}/readyz`, token)
        return res.status === 200 && res.body.trim() === 'ok'
      })
    }
    await runApiserver()

    // The generated file holds the serving cert followed by the CA that signed it.
    const caPem = lastPemCertificate(readFileSync(join(certDir, 'apiserver.crt'), 'utf8'))
    const kubeconfig = stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{name: 'envtest', cluster: {server, 'certificate-authority-data': Buffer.from(caPem).toString('base64')}}],
      users: [{name: 'admin', user: {token}}],
      contexts: [{name: 'envtest', context: {cluster: 'envtest', user: 'admin'}}],
      'current-context': 'envtest',
    })
    const kubeconfigPath = join(dir, 'kubeconfig')
    writeFileSync(kubeconfigPath, kubeconfig, {mode: 0o600})
    // Verifying TLS with the CA proves the kubeconfig is usable as written.
    const verified = await probe(`${server}/version`, token, caPem)
    if (verified.status !== 200) throw new Error(`envtest: /version answered ${verified.status}: ${verified.body}`)

    const controllers = opts.controllers !== false
    const runControllers = async (restored: boolean): Promise<void> => {
      const caPath = join(dir, 'ca.crt')
      writeFileSync(caPath, caPem)
      const leaderLease = (name: string) => `${server}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/${name}`
      if (restored) {
        // A restored etcd still holds the leader Leases of the controllers save() killed. New
        // controllers would wait out their 15 s lease duration (client-go leaderelection's
        // default) before acting, so a file that changes a workload right after restoring would
        // see no rollout for up to 15 s. Their holders are gone for sure: release the Leases.
        for (const name of CONTROLLER_LEASES) {
          const res = await probe(leaderLease(name), token, caPem, 'DELETE')
          if (res.status !== 200 && res.status !== 404) throw new Error(`envtest: deleting the saved Lease ${name} answered ${res.status}: ${res.body}`)
        }
      }
      // Both talk to the API server as the admin (no per-controller credentials: nothing here
      // tests the controllers' RBAC) and serve no port of their own. They take their leader
      // Leases in kube-system as on a real control plane (at once: nobody holds them), which is
      // how a client can tell that a garbage collector runs. Higher client rates than the
      // defaults (20/30): tests roll out many workloads at once.
      const common = [`--kubeconfig=${kubeconfigPath}`, '--secure-port=0', '--kube-api-qps=200', '--kube-api-burst=400', '--v=1']
      const kcm = startProcess(
        join(binDir, 'kube-controller-manager'),
        [
          ...common,
          // Signs the ServiceAccount tokens and publishes the CA as kube-root-ca.crt, as on a real control plane.
          `--service-account-private-key-file=${join(dir, 'sa.key')}`,
          `--root-ca-file=${caPath}`,
          '--use-service-account-credentials=false',
          // Rollouts in tests take seconds: the default sync and GC periods would make waits slow.
          '--concurrent-deployment-syncs=10',
          '--concurrent-replicaset-syncs=10',
          '--concurrent-daemonset-syncs=10',
          '--concurrent-statefulset-syncs=10',
          '--concurrent-gc-syncs=20',
          '--concurrent-namespace-syncs=10',
        ],
        dir,
        'kube-controller-manager.log',
      )
      procs.push(kcm)
      const scheduler = startProcess(join(binDir, 'kube-scheduler'), common, dir, 'kube-scheduler.log')
      procs.push(scheduler)
      // The serviceaccount controller creates `default` in every namespace once it runs.
      await waitFor(
        'kube-controller-manager',
        kcm,
        timeoutMs,
        async () => (await probe(`${server}/api/v1/namespaces/default/serviceaccounts/default`, token, caPem)).status === 200,
      )
      // Leading, not just started: on a restored cluster the ServiceAccount above was there before.
      for (const [name, proc] of [
        ['kube-controller-manager', kcm],
        ['kube-scheduler', scheduler],
      ] as const)
        await waitFor(`${name} (its leader Lease)`, proc, timeoutMs, async () => (await probe(leaderLease(name), token, caPem)).status === 200)
      if (scheduler.child.exitCode !== null) throw new Error(`envtest: kube-scheduler exited:\n${logTail(scheduler.logPath)}`)
    }
    if (controllers) await runControllers(Boolean(opts.restoreFrom))

    const etcdutl = join(binDir, 'etcdutl')
    let lost = false
    return {
      kubeconfigPath,
      kubeconfig,
      server,
      token,
      caPem,
      controllers,
      ports: {apiServer, etcdClient, etcdPeer},
      etcdEndpoint: etcdUrl,
      etcdutl,
      startMs: Date.now() - t0,
      stop,
      async save(to: string) {
        if (stopped) throw new Error('envtest: save() after stop()')
        stopped = true
        for (const p of [...procs].reverse()) await killKeepingFiles(p)
        mkdirSync(to, {recursive: true})
        for (const part of SAVED) cpSync(join(dir, part), join(to, part), {recursive: true})
        rmSync(dir, {recursive: true, force: true})
      },
      async lose() {
        if (stopped || lost) throw new Error('envtest: lose() on a control plane that is not running')
        lost = true
        for (const p of [...procs].reverse()) await killKeepingFiles(p)
        procs = []
        rmSync(join(dir, 'etcd'), {recursive: true, force: true})
      },
      async recover(snapshot: string) {
        if (stopped || !lost) throw new Error('envtest: recover() needs a control plane lose() stopped')
        // As Talos's recoverFromSnapshot (internal/app/machined/pkg/system/services/etcd.go, v1.14):
        // etcdutl's snapshot Restore into the empty data folder, as a one-member cluster of this
        // member's name and peer URL; etcd then starts from it as after any restart.
        const restored = spawnSync(
          etcdutl,
          [
            'snapshot',
            'restore',
            snapshot,
            `--data-dir=${join(dir, 'etcd')}`,
            '--name=envtest',
            `--initial-cluster=envtest=${peerUrl}`,
            `--initial-advertise-peer-urls=${peerUrl}`,
          ],
          {encoding: 'utf8'},
        )
        if (restored.status !== 0) throw new Error(`envtest: etcdutl snapshot restore failed (exit ${restored.status}):\n${restored.stderr}`)
        lost = false
        procs.push(runEtcd())
        await runApiserver()
        if (controllers) await runControllers(true)
      },
    }
  } catch (err) {
    await stop()
    throw err
  }
}

// Talos's default PodSecurity admission configuration (see the file header).
const TALOS_ADMISSION_CONFIG = stringify({
  apiVersion: 'apiserver.config.k8s.io/v1',
  kind: 'AdmissionConfiguration',
  plugins: [
    {
      name: 'PodSecurity',
      configuration: {
        apiVersion: 'pod-security.admission.config.k8s.io/v1alpha1',
        kind: 'PodSecurityConfiguration',
        defaults: {
          enforce: 'baseline',
          'enforce-version': 'latest',
          audit: 'restricted',
          'audit-version': 'latest',
          warn: 'restricted',
          'warn-version': 'latest',
        },
        exemptions: {usernames: [], runtimeClasses: [], namespaces: ['kube-system']},
      },
    },
  ],
})

async function distinctFreePorts(n: 3): Promise<[number, number, number]> {
  const ports = new Set<number>()
  while (ports.size < n) ports.add(await freePort())
  return [...ports] as [number, number, number]
}

function lastPemCertificate(bundle: string): string {
  const certs = bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)
  if (!certs?.length) throw new Error('envtest: no certificate in the generated apiserver.crt')
  return `${certs[certs.length - 1]}\n`
}
