#!/usr/bin/env node
// Talos node SIMULATOR behind the `talosctl` command line, for the e2e tests. No Talos
// node can boot here, so this script plays the nodes: it never opens a connection to a
// node address; each node is a file in $TALOS_SIM_STATE.
//
//   $TALOS_SIM_STATE/nodes.json      written by the test: [{ip, role, talosVersion, disks?}] (disks:
//                                    device paths or Disk specs, see disksOf; default /dev/sda, /dev/nvme0n1)
//   $TALOS_SIM_STATE/node-<ip>.json  {mode: maintenance|configured, config: <yaml text>}
//   $TALOS_SIM_STATE/bootstrapped    present once `bootstrap` ran
//   $TALOS_SIM_KUBECONFIG            the harness apiserver's kubeconfig (what `kubeconfig` hands out,
//                                    and where inline manifests are applied)
//   $TALOS_SIM_REAL_TALOSCTL         optional real talosctl: `gen secrets`, `gen config` and
//                                    `validate` are delegated to it; without it they are minimal
//                                    stand-ins of this simulator (their output is NOT checked by Talos)
//   $TALOS_SIM_CLIENT_KUBECONFIG     optional: what `kubeconfig` hands out instead (the harness's
//                                    proxy that refuses until bootstrap, test/harness/api-proxy.ts)
//   $TALOS_SIM_ETCD_ENDPOINT      the harness etcd's client URL (`etcd snapshot` reads the real snapshot)
//   $TALOS_SIM_ETCDUTL            the real etcdutl (`etcd snapshot`'s status line, as talosctl prints it)
//   $TALOS_SIM_MANIFEST_RUN_MS       how long a manifest run takes from its inventory read to its
//                                    write (default 1000)
//   $TALOS_SIM_STATE/manifest-*, manifeststatus-<ip>.json   the background manifest runs (below)
//   $TALOS_SIM_STATE/machineconfig-reads.log   one line per `get machineconfig` call: its nodes (a,b,c)
//
// Inline manifests are applied as the node's Talos version does (see
// src/lib/talos/INVENTORY.md for the source this follows):
//   < 1.13  node: create-only.             upgrade-k8s: create or replace, never prune.
//   >= 1.13 node: create-only, server-side applied (field manager `talos`) with the
//           `config.k8s.io/owning-inventory` annotation, keys recorded in
//           kube-system/talos-bootstrap-manifests-inventory (existing objects backfilled).
//           upgrade-k8s: server-side apply with force, then prune inventory objects that are
//           no longer in the manifests (unless --manifests-no-prune), inventory policy checked.
// A config change on a bootstrapped control plane starts a manifest run that ends on its own
// timer, in a detached runner process, whatever talosctl calls come meanwhile: the run reads
// the inventory at once, applies, and TALOS_SIM_MANIFEST_RUN_MS later writes that copy back
// (an unconditional Update, as go-kubernetes v0.2.41 does); only then does `get
// manifeststatus` list the new manifest ids. Runs hold a cluster-wide mutex from read to write
// and a node's changes during its run coalesce into one more run, as manifest_apply.go
// (v1.14.1) does (see afterConfigChange). The harness's cleanup() kills the runners.
// Of Talos's own bootstrap manifests only "10-kube-proxy" is modelled (CoreDNS and flannel
// are not applied): internal/app/machined/pkg/controllers/k8s/manifest.go (v1.14.0-rc.1)
// renders it on control planes while the proxy is enabled (KubeProxyConfig `enabled`, else
// `cluster.proxy.disabled`; absent means enabled), and manifest_apply.go applies it like any
// other manifest: create-only, so turning the proxy off never deletes the DaemonSet (only
// upgrade-k8s prunes it), and turning it on creates what is neither live nor in the inventory.
// The objects carry the names and labels of k8stemplates/kube-proxy.go (no real pod spec).
import {spawn, spawnSync} from 'node:child_process'
import {X509Certificate, randomBytes} from 'node:crypto'
import {appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {isDeepStrictEqual} from 'node:util'
import {setTimeout as sleep} from 'node:timers/promises'
import {parseAllDocuments, stringify} from 'yaml'
import {kubeRest} from './kube-rest.mjs'
import {KWOK_NODE_ANNOTATION, nodeFor, syncKubelet} from './kubelet-registration.mjs'

const INVENTORY_NAMESPACE = 'kube-system'
const INVENTORY_NAME = 'talos-bootstrap-manifests-inventory'
const INVENTORY_PATH = `/api/v1/namespaces/${INVENTORY_NAMESPACE}/configmaps/${INVENTORY_NAME}`
const INVENTORY_ANNOTATION = 'config.k8s.io/owning-inventory'
const FIELD_MANAGER = 'talos'
const RBAC_KINDS = new Set(['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'])
const BOOLEAN_FLAGS = new Set([
  'insecure',
  'force',
  'client',
  'manifests-no-prune',
  'dry-run',
  'strict',
  'short',
  'merge',
  'with-docs',
  'with-examples',
  'manifests-force',
  'drain',
  'no-reboot',
  'wait',
  'graceful',
  'reboot',
])
const SHORT_FLAGS = {n: 'nodes', e: 'endpoints', o: 'output', i: 'insecure', p: 'patch', m: 'mode', c: 'config'}

class CliError extends Error {}

function fail(message) {
  throw new CliError(message)
}

// ---------- argument parsing ----------

function parseArgs(argv) {
  const positionals = []
  const flags = {}
  const add = (name, value) => (flags[name] = [...(flags[name] ?? []), value])
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg.startsWith('--')) {
      const [rawName, inline] = arg.slice(2).split(/=(.*)/s, 2)
      if (inline !== undefined) add(rawName, inline)
      else if (BOOLEAN_FLAGS.has(rawName)) add(rawName, 'true')
      else add(rawName, argv[++i] ?? fail(`flag needs an argument: --${rawName}`))
    } else if (arg.startsWith('-') && arg.length === 2) {
      const name = SHORT_FLAGS[arg[1]] ?? fail(`unknown shorthand flag: '${arg[1]}' in ${arg}`)
      if (BOOLEAN_FLAGS.has(name)) add(name, 'true')
      else add(name, argv[++i] ?? fail(`flag needs an argument: ${arg}`))
    } else positionals.push(arg)
  }
  const one = (name) => flags[name]?.at(-1)
  const bool = (name) => flags[name] !== undefined && one(name) !== 'false'
  const list = (name) => (flags[name] ?? []).flatMap((v) => v.split(',')).filter(Boolean)
  return {positionals, flags, one, bool, list}
}

// ---------- node state ----------

// Set in a manifest runner: it must never re-create a state dir the test has removed.
let isRunner = false

function stateDir() {
  const dir = process.env.TALOS_SIM_STATE ?? fail('TALOS_SIM_STATE is not set (the simulator keeps its nodes there)')
  if (isRunner) {
    if (!existsSync(dir)) process.exit(0) // the test is over
  } else mkdirSync(dir, {recursive: true})
  return dir
}

function declaredNodes() {
  const path = join(stateDir(), 'nodes.json')
  if (!existsSync(path)) fail(`${path} is missing: the test declares the simulated nodes there`)
  return JSON.parse(readFileSync(path, 'utf8'))
}

function connectionRefused(ip, what) {
  return fail(
    `${what}: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"`,
  )
}

/** What the machine's file says, whether it answers or not. */
function loadNodeFile(decl) {
  const path = join(stateDir(), `node-${decl.ip}.json`)
  const saved = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : {mode: 'maintenance', config: null, configVersion: 0}
  return {...decl, ...saved, talosVersion: saved.bootedVersion ?? decl.talosVersion, path}
}

function loadNode(ip, what) {
  const decl = declaredNodes().find((n) => n.ip === ip)
  if (!decl) connectionRefused(ip, what)
  const path = join(stateDir(), `node-${ip}.json`)
  const saved = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : {mode: 'maintenance', config: null, configVersion: 0}
  // A machine rebooting after an apply answers nothing until it is back (apid is down).
  if (saved.rebootUntil && Date.now() < saved.rebootUntil) connectionRefused(ip, what)
  // A machine shut down by `reset` without --reboot answers nothing until someone powers it on.
  if (saved.mode === 'off') connectionRefused(ip, what)
  return {...decl, ...saved, talosVersion: saved.bootedVersion ?? decl.talosVersion, path}
}

function saveNode(node) {
  const {mode, config, configVersion, installError, rebootUntil, bootedVersion, booting, lastBoot, etcdLeft, etcdJoinedAt} = node
  writeJsonAtomic(node.path, {
    mode,
    config,
    configVersion,
    // Its etcd member was removed (`etcd leave`): etcd is stopped and its data gone until a reset.
    ...(etcdLeft ? {etcdLeft} : {}),
    // When its member joined a running etcd as a learner (a control plane configured after bootstrap).
    ...(etcdJoinedAt ? {etcdJoinedAt} : {}),
    // The version an upgrade booted (nodes.json's until one did), and an upgrade's boot to come.
    ...(bootedVersion ? {bootedVersion} : {}),
    ...(booting ? {booting} : {}),
    ...(lastBoot ? {lastBoot} : {}),
    ...(installError ? {installError} : {}),
    ...(rebootUntil && Date.now() < rebootUntil ? {rebootUntil} : {}),
  })
}

function isBootstrapped() {
  return existsSync(join(stateDir(), 'bootstrapped'))
}

function requireNode(args, what) {
  const nodes = args.list('nodes')
  if (nodes.length === 0)
    fail(`${what}: nodes are not set for the command: please use \`--nodes\` flag or configuration file to set the nodes to run the command against`)
  if (nodes.length > 1) fail(`${what}: the simulator addresses one node per call (got ${nodes.join(',')})`)
  return nodes[0]
}

function requireTalosconfig(args, ip, what) {
  const path = args.one('talosconfig') ?? process.env.TALOSCONFIG
  if (!path || !existsSync(path)) fail(`${what}: failed to determine endpoints (no talosconfig for node ${ip})`)
}

const UNKNOWN_AUTHORITY =
  'rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"'

function requireConfigured(node, args, what) {
  if (args.bool('insecure')) {
    if (node.mode === 'configured')
      fail(`${what}: rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"`)
    return
  }
  requireTalosconfig(args, node.ip, what)
  if (node.mode !== 'configured') fail(`${what}: ${UNKNOWN_AUTHORITY}`)
  requireSameBundle(node, args, what)
}

/**
 * A configured node talks only to a talosconfig of its own secrets bundle (mutual TLS). apid
 * serves with client auth Mutual against the machine's OS CA, `machine.ca` of its config
 * (siderolabs/talos internal/app/apid/pkg/provider/tls.go ServerConfig: WithClientAuthType(Mutual),
 * WithCACertPEM(ca)), and talosctl verifies the node's certificate, issued by that CA, against the
 * talosconfig's `ca`. So another bundle's talosconfig fails the handshake on the client side
 * ("signed by unknown authority"); a talosconfig with the right `ca` but a client certificate
 * another CA signed is refused by the node ("bad certificate").
 */
function requireSameBundle(node, args, what) {
  const path = args.one('talosconfig') ?? process.env.TALOSCONFIG
  const talosconfig = parseDocs(readFileSync(path, 'utf8'), 'talosconfig')[0] ?? {}
  const context = talosconfig.contexts?.[talosconfig.context] ?? {}
  const nodeCa = parseDocs(node.config, 'machine config').find(isLegacy)?.machine?.ca?.crt
  if (!nodeCa || context.ca !== nodeCa) fail(`${what}: ${UNKNOWN_AUTHORITY}`)
  let ca, client
  try {
    ca = new X509Certificate(Buffer.from(nodeCa, 'base64'))
    client = new X509Certificate(Buffer.from(context.crt ?? '', 'base64'))
  } catch {
    return // the stand-in `gen` of this simulator writes no real certificates: the CA match above is all it can check
  }
  if (!client.verify(ca.publicKey))
    fail(`${what}: rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: bad certificate"`)
}

function versionAtLeast(version, major, minor) {
  const m = /^v?(\d+)\.(\d+)/.exec(version ?? '') ?? fail(`bad Talos version "${version}" in nodes.json`)
  return Number(m[1]) > major || (Number(m[1]) === major && Number(m[2]) >= minor)
}

// ---------- machine config ----------

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
const clone = (v) => structuredClone(v)

// Talos decodes manifests with Kubernetes' YAML reader (YAML 1.1: `0400` is octal 256),
// as helm does; reading them as YAML 1.2 would change values and fake conflicts.
function parseDocs(text, what) {
  const docs = parseAllDocuments(text, {version: '1.1'})
  for (const d of docs) if (d.errors.length) fail(`${what}: ${d.errors[0].message}`)
  return docs.map((d) => d.toJS()).filter((d) => d !== null && d !== undefined)
}

function renderDocs(docs) {
  return docs.map((d) => stringify(d, {lineWidth: 0})).join('---\n')
}

const isLegacy = (d) => !d.kind && !d.apiVersion

function machineType(docs) {
  return docs.find(isLegacy)?.machine?.type
}

function sameDoc(a, b) {
  if (isLegacy(a) || isLegacy(b)) return isLegacy(a) && isLegacy(b)
  return a.apiVersion === b.apiVersion && a.kind === b.kind && (a.name ?? null) === (b.name ?? null)
}

/** Talos-style strategic merge of a multi-document patch, `$patch: delete` included. */
function patchDocs(docs, patches) {
  let out = clone(docs)
  for (const p of patches) {
    if (!isObj(p)) fail('a config patch document must be a mapping')
    if (p.$patch === 'delete') {
      out = out.filter((d) => !sameDoc(d, p))
      continue
    }
    const target = out.find((d) => sameDoc(d, p))
    if (target) mergeInto(target, p)
    else out.push(mergeInto({}, p))
  }
  return out
}

function mergeInto(dst, src) {
  for (const [k, v] of Object.entries(src)) {
    if (k === '$patch') continue
    if (isObj(v) && v.$patch === 'delete') {
      delete dst[k]
    } else if (Array.isArray(v)) {
      let arr = Array.isArray(dst[k]) ? dst[k] : []
      for (const item of v) {
        if (isObj(item) && item.$patch === 'delete') {
          // Talos selects list items by the first key: value of the delete item.
          const [sk, sv] = Object.entries(item).find(([kk]) => kk !== '$patch') ?? fail(`no key:val found in sequence node for path ${k}`)
          arr = arr.filter((it) => !(isObj(it) && it[sk] === sv))
        } else arr = [...arr, clone(item)]
      }
      dst[k] = arr
    } else if (isObj(v)) {
      dst[k] = mergeInto(isObj(dst[k]) ? dst[k] : {}, v)
    } else dst[k] = clone(v)
  }
  return dst
}

function readPatchArg(value) {
  return value.startsWith('@') ? readFileSync(value.slice(1), 'utf8') : value
}

/** Inline manifests of a config: legacy `cluster.inlineManifests` and v1.14 KubeInlineManifestConfig documents. */
function inlineManifests(configText) {
  if (!configText) return []
  const docs = parseDocs(configText, 'machine config')
  const out = []
  for (const d of docs) {
    if (isLegacy(d)) for (const m of d.cluster?.inlineManifests ?? []) out.push({name: m.name, contents: m.contents ?? ''})
    if (d.kind === 'KubeInlineManifestConfig') out.push({name: d.name, contents: d.manifest ?? ''})
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** Whether the config runs kube-proxy, as Talos reads it (the typed document, else the v1alpha1 field). */
function proxyEnabled(configText) {
  if (!configText) return false
  const docs = parseDocs(configText, 'machine config')
  const typed = docs.find((d) => d.kind === 'KubeProxyConfig')
  if (typed) return typed.enabled ?? true
  return docs.find(isLegacy)?.cluster?.proxy?.disabled !== true
}

/** Talos's "10-kube-proxy" bootstrap manifest (without a proxy config: no ConfigMap). */
function kubeProxyObjects() {
  const labels = {'k8s-app': 'kube-proxy', tier: 'node'}
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: {name: 'kube-proxy', namespace: 'kube-system', labels},
      spec: {
        selector: {matchLabels: labels},
        updateStrategy: {type: 'RollingUpdate'},
        template: {
          metadata: {labels},
          spec: {
            hostNetwork: true,
            priorityClassName: 'system-cluster-critical',
            serviceAccountName: 'kube-proxy',
            tolerations: [{operator: 'Exists'}],
            containers: [{name: 'kube-proxy', image: 'registry.k8s.io/kube-proxy:v1.37.0', command: ['/usr/local/bin/kube-proxy']}],
          },
        },
      },
    },
    {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'kube-proxy', namespace: 'kube-system'}},
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: {name: 'kube-proxy'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node-proxier'},
      subjects: [{kind: 'ServiceAccount', name: 'kube-proxy', namespace: 'kube-system'}],
    },
  ]
}

function manifestObjects(configText) {
  const bootstrap = proxyEnabled(configText) ? kubeProxyObjects() : []
  const objects = [...bootstrap, ...inlineManifests(configText).flatMap((m) => parseDocs(m.contents, `inline manifest ${m.name}`))]
  const rank = (o) => (o.kind === 'Namespace' && o.apiVersion === 'v1' ? 0 : o.kind === 'CustomResourceDefinition' ? 1 : 2)
  // Namespaces first, then CRDs, the rest in manifest order (a stable sort, as Talos does).
  return objects
    .map((o, i) => ({o, i}))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map(({o}) => o)
}

// ---------- Kubernetes side ----------

let client
async function kube() {
  client ??= kubeRest(process.env.TALOS_SIM_KUBECONFIG ?? fail('TALOS_SIM_KUBECONFIG is not set (the harness apiserver kubeconfig)'))
  return client
}

const isNotFound = (e) => e?.code === 404

function groupOf(apiVersion) {
  return apiVersion.includes('/') ? apiVersion.split('/')[0] : ''
}

/** cli-utils ObjMetadata.String(): <namespace>_<name>_<group>_<kind>, ":" as "__" in RBAC names. */
function inventoryKey(obj) {
  let name = obj.metadata.name
  const group = groupOf(obj.apiVersion)
  if (group === 'rbac.authorization.k8s.io' && RBAC_KINDS.has(obj.kind)) name = name.replaceAll(':', '__')
  return `${obj.metadata.namespace ?? ''}_${name}_${group}_${obj.kind}`
}

function parseInventoryKey(key) {
  const first = key.indexOf('_')
  const last = key.lastIndexOf('_')
  const beforeLast = key.lastIndexOf('_', last - 1)
  const kind = key.slice(last + 1)
  const group = key.slice(beforeLast + 1, last)
  let name = key.slice(first + 1, beforeLast)
  if (group === 'rbac.authorization.k8s.io') name = name.replaceAll('__', ':')
  return {namespace: key.slice(0, first), name, group, kind}
}

/** Sets the namespace the way Talos does: defaulted for namespaced kinds, dropped for cluster-scoped ones. */
async function normalizeScope(obj) {
  const res = await (await kube()).resource(obj.apiVersion, obj.kind)
  if (!res) fail(`error creating mapping for object ${obj.apiVersion}/${obj.kind}/${obj.metadata?.name}: no matches for kind "${obj.kind}"`)
  obj.metadata ??= {}
  if (res.namespaced) obj.metadata.namespace ||= 'default'
  else delete obj.metadata.namespace
  return obj
}

async function readLive(obj) {
  try {
    return await (await kube()).read({apiVersion: obj.apiVersion, kind: obj.kind, metadata: {name: obj.metadata.name, namespace: obj.metadata.namespace}})
  } catch (e) {
    if (isNotFound(e)) return undefined
    throw e
  }
}

async function readInventory() {
  const k = await kube()
  try {
    const cm = await k.request('GET', INVENTORY_PATH)
    return new Set(Object.keys(cm.data ?? {}))
  } catch (e) {
    if (!isNotFound(e)) throw e
    await k.request('POST', INVENTORY_PATH.replace(/\/[^/]+$/, ''), {
      body: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: INVENTORY_NAME, namespace: INVENTORY_NAMESPACE}},
    })
    return new Set()
  }
}

/** A whole-object, unconditional update, as go-kubernetes' configmap inventory writes it. */
async function writeInventory(keys) {
  const data = Object.fromEntries([...keys].sort().map((k) => [k, '']))
  await (
    await kube()
  ).request('PUT', INVENTORY_PATH, {body: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: INVENTORY_NAME, namespace: INVENTORY_NAMESPACE}, data}})
}

const describe = (o) => `${groupOf(o.apiVersion)}/${o.apiVersion.split('/').at(-1)}/${o.kind}/${o.metadata.name}`

function withInventoryAnnotation(obj) {
  const annotations = (obj.metadata.annotations ??= {})
  const current = annotations[INVENTORY_ANNOTATION]
  if (current !== undefined && current !== INVENTORY_NAME) fail(`object ${describe(obj)} already has an inventory annotation`)
  annotations[INVENTORY_ANNOTATION] = INVENTORY_NAME
  return obj
}

// Writes go through the real kubectl, not client-node: client-node re-serialises objects
// through its typed models, which changes some fields (and would fake field conflicts
// with what helm applies later). kubectl sends the object as given, like Talos does.
function kubectl(args, obj) {
  const path = process.env.TALOS_SIM_KUBECONFIG ?? fail('TALOS_SIM_KUBECONFIG is not set (the harness apiserver kubeconfig)')
  const r = spawnSync(process.env.ICHOR_KUBECTL ?? 'kubectl', ['--kubeconfig', path, ...args, '-f', '-'], {input: JSON.stringify(obj), encoding: 'utf8'})
  if (r.error) fail(`kubectl: ${r.error.message} (install the Debian package kubectl)`)
  if (r.status !== 0) fail(`applying ${describe(obj)}: ${r.stderr.trim()}`)
}

async function serverSideApply(obj) {
  kubectl(['apply', '--server-side', '--force-conflicts', `--field-manager=${FIELD_MANAGER}`], obj)
}

async function createObject(obj) {
  kubectl(['create', `--field-manager=${FIELD_MANAGER}`], obj)
}

async function replaceObject(obj) {
  kubectl(['replace', `--field-manager=${FIELD_MANAGER}`], obj)
}

/**
 * Manifest ids as Talos names its Manifest resources: `<priority>-<name>`. Inline manifests
 * get priority 99 (k8s/control_plane.go, ControlPlaneExtraManifestsController, v1.14.1);
 * kube-proxy is Talos's own "10-kube-proxy".
 */
function manifestIds(configText) {
  return [...(proxyEnabled(configText) ? ['10-kube-proxy'] : []), ...inlineManifests(configText).map((m) => `99-${m.name}`)].sort()
}

/**
 * One run of the node's ManifestApplyController (k8s/manifest_apply.go, v1.14.1): under
 * Talos's etcd mutex it reads the inventory ConfigMap, creates what is missing (backfilling
 * what exists), then writes the inventory back, then sets its ManifestStatus to the manifest
 * ids it ran with. Returns the inventory it read and updated (null before 1.13: no inventory).
 */
async function runManifestApply(node) {
  const objects = manifestObjects(node.config)
  if (!versionAtLeast(node.talosVersion, 1, 13)) {
    for (const obj of objects) {
      await normalizeScope(obj)
      if (await readLive(obj)) continue
      await createObject(obj)
      log(`created ${describe(obj)}`)
    }
    return null
  }
  const inventory = await readInventory()
  for (const obj of objects) {
    await normalizeScope(obj)
    const key = inventoryKey(obj)
    if (inventory.has(key)) continue
    if (await readLive(obj)) {
      inventory.add(key) // backfill: an existing object is recorded, never touched
      continue
    }
    await serverSideApply(withInventoryAnnotation(obj))
    inventory.add(key)
    log(`created ${describe(obj)}`)
  }
  return inventory
}

/** A whole run at once (etcd bootstrap: nothing else is running yet). */
async function nodeApplyManifests(node) {
  const inventory = await runManifestApply(node)
  if (inventory) await writeInventory(inventory)
  writeManifestStatus(node.ip, {manifestsApplied: manifestIds(node.config), configVersion: node.configVersion})
}

// ---------- manifest runs after a config change: on their own timer ----------
//
// On the node, ManifestApplyController (k8s/manifest_apply.go, v1.14.0-rc.1, unchanged in
// v1.14.1) is one loop per control plane that reacts to changes of its Manifest resources
// (`r.EventCh()`, so changes made during a run coalesce into one more run with the manifests
// listed then). A run takes the cluster-wide etcd mutex `constants.EtcdTalosManifestApplyMutex`
// (internal/pkg/etcd `WithLock`) around `ssa.GetInventory` ... apply ... `inv.Write`, releases
// it, and only then sets its ManifestStatus. go-kubernetes v0.2.41
// kubernetes/ssa/internal/inventory/configmap/inventory.go `Write` Updates a fresh ConfigMap
// without resourceVersion: an edit made between the run's read and its write is lost.
// `talosctl patch`/`apply-config` answer before any of that is done.
//
// Here: the talosctl process that changed the config reads the inventory and applies at once
// when no other run holds the mutex (the controller reacts within milliseconds: the read comes
// before anything the caller does next, the worst case for a caller that edits the inventory),
// then hands the run to a detached "runner" process for that node, which writes the copy it
// read and the status TALOS_SIM_MANIFEST_RUN_MS (default 1000) after the read, independently of
// any talosctl call, then runs again while the node's config is newer than its last run.
// State files, all in $TALOS_SIM_STATE:
//   manifest-runner-<ip>.pid      the node's controller loop (the runner, or the talosctl
//                                 process about to start it); cleanup() of the harness kills it
//   manifest-apply.mutex          pid holding the etcd mutex (between inventory read and write)
//   manifest-run-<ip>.json        the run in flight: the inventory copy read, ids, due time
//   manifeststatus-<ip>.json      the ManifestStatus: {manifestsApplied, configVersion}

const RUNNER_ARG = '__manifest-runner'
const DEFAULT_MANIFEST_RUN_MS = 1000
const runnerPidFile = (ip) => join(stateDir(), `manifest-runner-${ip}.pid`)
const mutexFile = () => join(stateDir(), 'manifest-apply.mutex')
const runFile = (ip) => join(stateDir(), `manifest-run-${ip}.json`)
const statusFile = (ip) => join(stateDir(), `manifeststatus-${ip}.json`)

function manifestRunMs() {
  const raw = process.env.TALOS_SIM_MANIFEST_RUN_MS?.trim() ?? ''
  return /^\d+$/.test(raw) ? Number(raw) : DEFAULT_MANIFEST_RUN_MS
}

/** Whole-file replace, so a concurrent reader never sees half a file. */
function writeJsonAtomic(path, value) {
  writeFileSync(`${path}.${process.pid}.tmp`, JSON.stringify(value, null, 2))
  renameSync(`${path}.${process.pid}.tmp`, path)
}

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'))
  } catch (e) {
    if (e.code === 'ENOENT') return undefined
    throw e
  }
}

function readManifestStatus(ip) {
  return readJson(statusFile(ip))
}

function writeManifestStatus(ip, status) {
  writeJsonAtomic(statusFile(ip), status)
}

/**
 * A live simulator process that wrote `path` (a pid file left by a killed one, or a reused pid,
 * does not count). pid_max can be 32768, so a dead runner's pid is soon another talosctl
 * process's: one that started after the file was written is not its holder. Without this a
 * killed runner's pid file, its pid reused, left the node's manifest runs stuck for good, which
 * Talos's controller (it runs on the node, not under talosctl) never is.
 */
function isSimulatorProcess(pid, path) {
  if (!isAlive(pid)) return false
  try {
    if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('talosctl')) return false
  } catch {
    return true // no /proc: trust the signal-0 probe
  }
  return !startedAfter(pid, path)
}

/** Did `pid` start after `path` was last written? (proc(5) starttime, USER_HZ 100; 1 s of slack.) */
function startedAfter(pid, path) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19])
    const uptimeS = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0])
    const startedAtMs = Date.now() - (uptimeS - startTicks / 100) * 1000
    return startedAtMs > statSync(path).mtimeMs + 1000
  } catch {
    return false
  }
}

/** Takes a pid file (a lock) for `pid`: free, or left by a process that is gone. */
function claim(path, pid = process.pid) {
  for (let i = 0; i < 2; i++) {
    try {
      writeFileSync(path, String(pid), {flag: 'wx'})
      return true
    } catch (e) {
      if (e.code !== 'EEXIST') throw e
    }
    const holder = Number(readJson(path))
    if (holder === pid) return true
    if (holder && isSimulatorProcess(holder, path)) return false
    rmSync(path, {force: true})
  }
  return false
}

function releaseIfMine(path, pid = process.pid) {
  if (Number(readJson(path)) === pid) rmSync(path, {force: true})
}

/** Under the mutex: read the inventory, apply, and record the run in flight (the write is due later). */
async function startManifestRun(node) {
  const inventory = await runManifestApply(node)
  const run = {
    configVersion: node.configVersion,
    inventory: inventory ? [...inventory] : null,
    manifestsApplied: manifestIds(node.config),
    dueAt: Date.now() + manifestRunMs(),
  }
  writeJsonAtomic(runFile(node.ip), run)
  return run
}

/** The end of a run: the stale inventory write, the mutex released, then the ManifestStatus. */
async function finishManifestRun(ip, run) {
  if (run.inventory) await writeInventory(new Set(run.inventory))
  releaseIfMine(mutexFile())
  writeManifestStatus(ip, {manifestsApplied: run.manifestsApplied, configVersion: run.configVersion})
  rmSync(runFile(ip), {force: true})
}

function spawnRunner(ip) {
  const child = spawn(process.execPath, [process.argv[1], RUNNER_ARG, ip, stateDir()], {detached: true, stdio: 'ignore', env: process.env})
  child.unref()
  return child.pid
}

/** After a config change on a bootstrapped control plane, Talos runs its manifest controller again (in the background). */
async function afterConfigChange(node) {
  if (isBootstrapped()) await syncKubelet(await kube(), node)
  if (!(node.mode === 'configured' && isControlPlane(node) && isBootstrapped())) return
  // The node's loop is running: it runs again after its current run (a coalesced event).
  if (!claim(runnerPidFile(node.ip))) return
  let holdsMutex = false
  try {
    holdsMutex = claim(mutexFile())
    if (holdsMutex) await startManifestRun(node)
  } catch (e) {
    if (holdsMutex) releaseIfMine(mutexFile())
    releaseIfMine(runnerPidFile(node.ip))
    throw e
  }
  const pid = spawnRunner(node.ip)
  // The runner owns both from now on (it starts long after these two writes).
  writeFileSync(runnerPidFile(node.ip), String(pid))
  if (holdsMutex) writeFileSync(mutexFile(), String(pid))
}

/** cenkalti/backoff v4.3.0 exponential.go with its defaults (InitialInterval 500 ms, RandomizationFactor 0.5, Multiplier 1.5, MaxInterval 60 s). */
function newRestartBackoff() {
  let current = 500
  return {
    next() {
      const delta = 0.5 * current
      const interval = current - delta + Math.random() * (2 * delta)
      current = current >= 60_000 / 1.5 ? 60_000 : current * 1.5
      return interval
    },
    reset() {
      current = 500
    },
  }
}

/** The detached runner: the node's manifest controller loop until no newer config is left to run. */
async function manifestRunner(ip) {
  isRunner = true
  const dir = stateDir()
  const deadline = Date.now() + 10 * 60_000 // never outlive a test by much, whatever happens to it
  const waitUntil = async (t) => {
    while (Date.now() < t) {
      if (!existsSync(dir) || Date.now() > deadline) process.exit(0)
      await sleep(Math.min(50, t - Date.now()))
    }
  }
  // A run that fails (an API request refused or timed out, the node rebooting) is run again
  // from its inventory read after a backoff: cosi-project/runtime v1.16.2 (Talos v1.14.0-rc.1's)
  // pkg/controller/runtime/internal/rruntime/run.go Adapter.Run restarts a controller whose Run
  // returned an error after `backoff.NextBackOff()`, cenkalti/backoff v4.3.0's exponential
  // defaults with no elapsed-time limit (rruntime.go): 500 ms, times 1.5, randomised by +-50 %,
  // at most 60 s; WithLock's defer has released the etcd mutex. manifest_apply.go (v1.14.0-rc.1,
  // line 154) resets the backoff after each run that set its status. Giving up instead left a
  // node's manifest run unfinished for good, which Talos never does.
  const restartBackoff = newRestartBackoff()
  for (;;) {
    try {
      let run = readJson(runFile(ip))
      if (!run) {
        const upToDate = () => (readManifestStatus(ip)?.configVersion ?? 0) >= loadNode(ip, 'manifest apply').configVersion
        if (upToDate()) {
          rmSync(runnerPidFile(ip), {force: true})
          // A change saved just before the release found this loop still registered: take it on.
          if (upToDate() || !claim(runnerPidFile(ip))) return
          continue
        }
        while (!claim(mutexFile())) await waitUntil(Date.now() + 25)
        run = await startManifestRun(loadNode(ip, 'manifest apply'))
      }
      await waitUntil(run.dueAt)
      await finishManifestRun(ip, run)
      restartBackoff.reset()
    } catch (e) {
      if (!existsSync(dir)) return
      appendFileSync(join(dir, `manifest-runner-${ip}.log`), `${new Date().toISOString()} ${e?.stack ?? e}\n`)
      rmSync(runFile(ip), {force: true})
      releaseIfMine(mutexFile())
      await waitUntil(Date.now() + restartBackoff.next())
    }
  }
}

const isControlPlane = (node) => node.role === 'controlplane' || node.role === 'init'

function checkInventoryPolicy(live, policy) {
  const value = live.metadata?.annotations?.[INVENTORY_ANNOTATION]
  const status = value === undefined ? 'Empty' : value === INVENTORY_NAME ? 'Match' : 'NoMatch'
  if (status === 'Match' || (status === 'Empty' && policy !== 'MustMatch') || (status === 'NoMatch' && policy === 'AdoptAll')) return
  fail(`inventory policy check failure for object ${describe(live)}, inventory policy prevented actuation (status: ${status}, policy: ${policy})`)
}

async function preferredGroupVersion(group) {
  if (group === '') return 'v1'
  const list = await (await kube()).request('GET', '/apis')
  const g = list.groups.find((x) => x.name === group) ?? fail(`no API group ${group}`)
  return g.preferredVersion?.groupVersion ?? g.versions[0].groupVersion
}

// ---------- upgrade-k8s ----------
// talosctl v1.14 cmd/talosctl/cmd/talos/upgrade-k8s.go and pkg/cluster/kubernetes/talos_managed.go
// (v1.14.0-rc.1), go-kubernetes v0.2.41 kubernetes/upgrade/path.go and kubernetes/ssa/diff.go.
// Modelled: the lowest version detected from the control planes' configs (--from overrides),
// the upgrade path (one minor at a time), the nodes' Talos version against the target
// (compat.go `VerifyVersionCompatibility`), each static pod's and each kubelet's image patched
// into the machine config node by node, service by service (a config change like any other:
// it starts a manifest run), kube-proxy's image, then the manifest sync; with --dry-run nothing
// is patched and the sync prints ssa `Diff`'s results (" < <Action> <Kind>/<ns>/<name>" and
// the diff) instead of applying, or, when any node runs Talos below 1.13, the legacy
// SyncWithLog lines (legacyDiffManifests). Logged to stdout, as UpgradeOptions.Log does.
// NOT modelled: no pod restarts (the harness's kube-apiserver stays v1.36.3: the version
// "running" is the one in the node configs), no image pre-pull, no removed-API checks
// (upgrade.NewChecks), no wait for manifest reconciliation.
const DEFAULT_KUBERNETES_VERSION = '1.37.0' // constants.DefaultKubernetesVersion, Talos v1.14.1
// pkg/machinery/compatibility/talos1XX/talos1XX.go Minimum/MaximumKubernetesVersion (v1.14.1).
const KUBERNETES_BY_TALOS = {1.13: ['1.31.0', '1.36.99'], 1.14: ['1.32.0', '1.37.99']}
// The config documents (v1.14 multi-document) and legacy v1alpha1 paths holding each image.
const IMAGES = {
  'kube-apiserver': {kind: 'KubeAPIServerConfig', legacy: ['cluster', 'apiServer'], repo: 'registry.k8s.io/kube-apiserver'},
  'kube-controller-manager': {kind: 'KubeControllerManagerConfig', legacy: ['cluster', 'controllerManager'], repo: 'registry.k8s.io/kube-controller-manager'},
  'kube-scheduler': {kind: 'KubeSchedulerConfig', legacy: ['cluster', 'scheduler'], repo: 'registry.k8s.io/kube-scheduler'},
  'kube-proxy': {kind: 'KubeProxyConfig', legacy: ['cluster', 'proxy'], repo: 'registry.k8s.io/kube-proxy'},
  kubelet: {kind: 'KubeletConfig', legacy: ['machine', 'kubelet'], repo: 'ghcr.io/siderolabs/kubelet'},
}

function say(line) {
  process.stdout.write(`${line}\n`)
}

const parseKube = (v) => {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v ?? '') ?? fail(`error parsing version "${v}"`)
  return [Number(m[1]), Number(m[2]), Number(m[3])]
}
const cmpKube = (a, b) => {
  const [x, y] = [parseKube(a), parseKube(b)]
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]
}

function imageOf(configText, service) {
  const spec = IMAGES[service]
  const docs = parseDocs(configText, 'machine config')
  const doc = docs.find((d) => d.kind === spec.kind)
  if (doc) return doc.image
  const legacy = docs.find(isLegacy)
  return legacy?.[spec.legacy[0]]?.[spec.legacy[1]]?.image
}

function withImage(configText, service, image) {
  const spec = IMAGES[service]
  const docs = parseDocs(configText, 'machine config')
  const doc = docs.find((d) => d.kind === spec.kind)
  if (doc) doc.image = image
  else {
    const legacy = docs.find(isLegacy) ?? fail('machine config has no v1alpha1 document')
    legacy[spec.legacy[0]] ??= {}
    legacy[spec.legacy[0]][spec.legacy[1]] = {...legacy[spec.legacy[0]][spec.legacy[1]], image}
  }
  return renderDocs(docs)
}

const tagOf = (image) => /:v?(\d+\.\d+\.\d+[^@]*)/.exec(image ?? '')?.[1]

/** DetectLowestVersion: the lowest kube-apiserver version of the control planes. */
function detectLowestVersion(controlPlanes) {
  const versions = controlPlanes.map((n) => tagOf(imageOf(n.config, 'kube-apiserver'))).filter(Boolean)
  if (versions.length === 0) fail('error detecting the lowest Kubernetes version no kube-apiserver image found')
  return versions.sort(cmpKube)[0]
}

/** go-kubernetes upgrade.Path.IsSupported: 1.19 to 1.37, the same minor or the next one. */
function pathSupported(from, to) {
  const [fM, fm] = parseKube(from)
  const [tM, tm] = parseKube(to)
  return fM === 1 && tM === 1 && fm >= 19 && tm <= 37 && (tm === fm || tm === fm + 1)
}

/** One node's image of one service, as upgradeStaticPodPatcher / the kubelet patcher do it. */
async function upgradeImage(ip, service, from, to, dryRun) {
  const node = loadNode(ip, 'error fetching nodes')
  say(` > "${ip}": starting update`)
  const want = `${IMAGES[service].repo}:v${to}`
  const current = imageOf(node.config, service)
  if (current === want) return // errUpdateSkipped: nothing logged, nothing patched
  say(` > update ${service}: ${tagOf(current) ?? from} -> ${to}`)
  if (dryRun) return say(' > skipped in dry-run')
  node.config = withImage(node.config, service, want)
  node.configVersion = (node.configVersion ?? 0) + 1
  saveNode(node)
  say(` > "${ip}": machine configuration patched`)
  await afterConfigChange(node)
  say(` < "${ip}": successfully updated`)
}

/** A line diff of two objects' YAML, enough to name what changes (textdiff in go-kubernetes). */
function objectDiff(subject, before, after) {
  const a = before ? stringify(before, {lineWidth: 0}).trimEnd().split('\n') : []
  const b = after ? stringify(after, {lineWidth: 0}).trimEnd().split('\n') : []
  const lines = [`--- a/${subject}`, `+++ b/${subject}`]
  for (const l of a) if (!b.includes(l)) lines.push(`-${l}`)
  for (const l of b) if (!a.includes(l)) lines.push(`+${l}`)
  return lines.join('\n')
}

const comparable = (o) => {
  if (!o) return o
  const {managedFields: _m, resourceVersion: _r, generation: _g, ...metadata} = o.metadata ?? {}
  const {status: _s, ...rest} = o
  return {...rest, metadata}
}

function ssaDryRun(obj) {
  const path = process.env.TALOS_SIM_KUBECONFIG ?? fail('TALOS_SIM_KUBECONFIG is not set (the harness apiserver kubeconfig)')
  const r = spawnSync(
    process.env.ICHOR_KUBECTL ?? 'kubectl',
    ['--kubeconfig', path, 'apply', '--server-side', '--force-conflicts', `--field-manager=${FIELD_MANAGER}`, '--dry-run=server', '-o', 'json', '-f', '-'],
    {input: JSON.stringify(obj), encoding: 'utf8'},
  )
  if (r.status !== 0) fail(`apply dry run failed for ${subjectOf(obj)}: ${r.stderr.trim()}`)
  return JSON.parse(r.stdout)
}

/** ssa/util.go formatPath: <kind>/<namespace>/<name>. */
const subjectOf = (o) => `${o.kind}/${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`

async function upgradeK8s(args) {
  const ip = requireNode(args, 'upgrade-k8s')
  const node = loadNode(ip, 'error fetching nodes')
  requireConfigured(node, args, 'upgrade-k8s')
  if (!isControlPlane(node)) fail(`upgrade-k8s: node ${ip} is not a control plane node`)
  if (!isBootstrapped()) fail('upgrade-k8s: error building kubernetes client: the cluster is not bootstrapped')
  const dryRun = args.bool('dry-run')
  const nodes = declaredNodes()
  const configured = nodes.map((n) => loadNode(n.ip, 'error fetching nodes')).filter((n) => n.mode === 'configured')
  const controlPlanes = configured.filter(isControlPlane)
  const workers = configured.filter((n) => !isControlPlane(n))
  let from = args.one('from')
  if (!from) {
    from = detectLowestVersion(controlPlanes)
    say(`automatically detected the lowest Kubernetes version ${from}`)
  }
  const to = (args.one('to') ?? DEFAULT_KUBERNETES_VERSION).replace(/^v/, '')
  from = from.replace(/^v/, '')
  if (!pathSupported(from, to)) {
    const [fM, fm] = parseKube(from)
    const [tM, tm] = parseKube(to)
    fail(`unsupported upgrade path ${fM}.${fm}->${tM}.${tm} (from "${from}" to "${to}")`)
  }
  say(`discovered controlplane nodes ${JSON.stringify(controlPlanes.map((n) => n.ip))}`)
  say(`discovered worker nodes ${JSON.stringify(workers.map((n) => n.ip))}`)
  for (const n of configured) {
    const range = KUBERNETES_BY_TALOS[n.talosVersion.replace(/^v/, '').split('.').slice(0, 2).join('.')]
    if (range && (cmpKube(to, range[0]) < 0 || cmpKube(to, range[1]) > 0)) {
      fail(`version of Kubernetes ${to} is not supported on Talos ${n.talosVersion}: supported versions are ${range[0]}-${range[1]}`)
    }
  }
  for (const n of configured) say(`> "${n.ip}": Talos version ${n.talosVersion} is compatible with Kubernetes version ${to}`)
  for (const service of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']) {
    say(`updating "${service}" to version "${to}"`)
    for (const cp of controlPlanes) await upgradeImage(cp.ip, service, from, to, dryRun)
  }
  say(`updating kube-proxy to version "${to}"`)
  for (const cp of controlPlanes) {
    say(` > "${cp.ip}": starting update`)
    if (dryRun) say(' > skipped in dry-run')
    else {
      const n = loadNode(cp.ip, 'error fetching nodes')
      const want = `${IMAGES['kube-proxy'].repo}:v${to}`
      if (imageOf(n.config, 'kube-proxy') !== want) {
        n.config = withImage(n.config, 'kube-proxy', want)
        n.configVersion = (n.configVersion ?? 0) + 1
        saveNode(n)
        await afterConfigChange(n)
      }
    }
  }
  say(`updating kubelet to version "${to}"`)
  for (const n of [...controlPlanes, ...workers]) await upgradeImage(n.ip, 'kubelet', from, to, dryRun)
  await syncManifests(node, args, nodes, dryRun)
}

async function syncManifests(node, args, nodes, dryRun) {
  const useSSA = nodes.every((n) => versionAtLeast(n.talosVersion, 1, 13))
  const objects = manifestObjects(loadNode(node.ip, 'error fetching nodes').config)
  for (const obj of objects) await normalizeScope(obj)
  if (!useSSA) {
    say('updating manifests')
    if (dryRun) return legacyDiffManifests(objects)
    // Legacy sync (Talos < 1.13 somewhere in the cluster): create or replace, never prune.
    for (const obj of objects) {
      const live = await readLive(obj)
      if (!live) await createObject(obj)
      else await replaceObject({...obj, metadata: {...obj.metadata, resourceVersion: live.metadata.resourceVersion}})
      log(` > apply manifest ${obj.kind} ${obj.metadata.name}`)
    }
    return
  }
  say(dryRun ? 'updating manifests (dry run)' : 'updating manifests')
  const policy = args.one('manifests-inventory-policy') ?? 'AdoptIfNoInventory'
  if (!['MustMatch', 'AdoptIfNoInventory', 'AdoptAll'].includes(policy)) fail(`invalid inventory policy "${policy}"`)
  const inventory = await readInventory()
  for (const obj of objects) withInventoryAnnotation(obj)
  if (dryRun) return diffManifests(objects, inventory, policy, args.bool('manifests-no-prune'))
  for (const obj of objects) {
    const live = await readLive(obj)
    if (live) checkInventoryPolicy(live, policy)
  }
  for (const obj of objects) {
    await serverSideApply(obj)
    inventory.add(inventoryKey(obj))
    log(` < apply ${describe(obj)}`)
  }
  await writeInventory(inventory)
  if (args.bool('manifests-no-prune')) return
  const wanted = new Set(objects.map(inventoryKey))
  for (const key of [...inventory].filter((k) => !wanted.has(k))) {
    const live = await liveOfKey(key)
    if (!live) {
      inventory.delete(key)
      continue
    }
    checkInventoryPolicy(live, policy)
    await (await kube()).delete(live, 'Background')
    inventory.delete(key)
    log(` < deleted ${describe(live)}`)
  }
  await writeInventory(inventory)
}

async function liveOfKey(key) {
  const ref = parseInventoryKey(key)
  const apiVersion = await preferredGroupVersion(ref.group)
  return readLive({apiVersion, kind: ref.kind, metadata: {name: ref.name, namespace: ref.namespace || undefined}})
}

/** ssa Manager.Diff: the prunes first (inventory policy checked), then each manifest object; nothing written. */
async function diffManifests(objects, inventory, policy, noPrune) {
  if (!noPrune) {
    const wanted = new Set(objects.map(inventoryKey))
    for (const key of [...inventory].filter((k) => !wanted.has(k)).sort()) {
      const live = await liveOfKey(key)
      if (!live) continue
      checkInventoryPolicy(live, policy)
      say(` < Pruned ${subjectOf(live)}`)
      say(objectDiff(`${live.apiVersion}.${subjectOf(live)}`, comparable(live), undefined))
    }
  }
  for (const obj of objects) {
    const live = await readLive(obj)
    if (!live) {
      say(` < created ${subjectOf(obj)}`)
      say(objectDiff(subjectOf(obj), undefined, obj))
      continue
    }
    checkInventoryPolicy(live, policy)
    const after = ssaDryRun(obj)
    if (isDeepStrictEqual(comparable(live), comparable(after))) say(` < unchanged ${subjectOf(obj)}`)
    else {
      say(` < configured ${subjectOf(obj)}`)
      say(objectDiff(subjectOf(obj), comparable(live), comparable(after)))
    }
  }
}

/** manifests.go formatManifestPath: "<group/version>.<Kind>/[<namespace>/]<name>". */
const manifestPath = (o) => `${o.apiVersion}.${subjectOf(o)}`

/** What the legacy diff leaves out (sync.go getResourceDiff): server-set metadata and "kubernetes.io/" annotations. */
const legacyComparable = (o) => {
  if (!o) return o
  const {
    uid: _u,
    resourceVersion: _r,
    generation: _g,
    creationTimestamp: _c,
    managedFields: _m,
    finalizers: _f,
    ownerReferences: _o,
    ...metadata
  } = o.metadata ?? {}
  const annotations = Object.fromEntries(Object.entries(metadata.annotations ?? {}).filter(([k]) => !k.includes('kubernetes.io/')))
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations
  else delete metadata.annotations
  const rest = {...o, metadata}
  if (o.kind === 'ServiceAccount') delete rest.secrets // injected by Kubernetes
  return rest
}

function replaceDryRun(obj) {
  const path = process.env.TALOS_SIM_KUBECONFIG ?? fail('TALOS_SIM_KUBECONFIG is not set (the harness apiserver kubeconfig)')
  const r = spawnSync(process.env.ICHOR_KUBECTL ?? 'kubectl', ['--kubeconfig', path, 'replace', '--dry-run=server', '-o', 'json', '-f', '-'], {
    input: JSON.stringify(obj),
    encoding: 'utf8',
  })
  if (r.status !== 0) fail(`update dry run failed for ${manifestPath(obj)}: ${r.stderr.trim()}`)
  return JSON.parse(r.stdout)
}

/**
 * The legacy dry run: go-kubernetes v0.2.41 kubernetes/manifests/cli.go `SyncWithLog` and sync.go
 * `Sync`/`updateManifest` with dryRun (what talosctl v1.14.1 talos_managed.go `syncManifests` runs
 * when any node's Talos is below 1.13, compatibility `SupportsSSAManifestSync`). Per object, in
 * order: " > processing manifest <path>", then " < no changes" when a dry-run Update (the
 * live resourceVersion set: a whole-object replace) changes nothing, else the diff and
 * " < dry run, change skipped". No inventory, no prune: nothing else is printed.
 */
async function legacyDiffManifests(objects) {
  for (const obj of objects) {
    say(` > processing manifest ${manifestPath(obj)}`)
    const live = await readLive(obj)
    const after = live ? replaceDryRun({...obj, metadata: {...obj.metadata, resourceVersion: live.metadata.resourceVersion}}) : obj
    const [a, b] = [legacyComparable(live), legacyComparable(after)]
    if (live && isDeepStrictEqual(a, b)) {
      say(' < no changes')
      continue
    }
    // The diff ends in a newline and UpgradeOptions.Log adds one: a blank line follows it.
    say(`${objectDiff(manifestPath(obj), a, b)}\n`)
    say(' < dry run, change skipped')
  }
}

// ---------- upgrade: the Talos OS of one node ----------
// talosctl v1.14 cmd/talosctl/cmd/talos/upgrade.go (v1.14.0-rc.1) `upgradeViaLifecycleService`,
// for nodes newer than 1.13.0-alpha.2 (`talosUpgradeAPIVersionRange`; older ones take the legacy
// MachineService path, not modelled here: refused, never faked). In order, as the client runs it:
//   1. the image is pulled, then LifecycleService.Upgrade installs it into the other boot slot
//      (an image the node cannot pull fails here: "error pulling upgrade image");
//   2. --drain (default true; --no-reboot turns it off) is done by the CLIENT
//      (cmd/talosctl/cmd/talos/drain.go drainNodes, cmd/talosctl/pkg/talos/nodedrain): cordon
//      (spec.unschedulable, no annotation), then kubectl's drain library as go-kubernetes
//      kubernetes/nodedrain/nodedrain.go configures it (IgnoreAllDaemonSets, DeleteEmptyDirData,
//      Force, eviction API so PodDisruptionBudgets hold, --drain-timeout default 5m);
//   3. reboot (rebootInternal, waiting while --wait, which --drain forces);
//   4. uncordonNodes: wait for the Node to be Ready, then uncordon it (a deferred step: it runs
//      only when the process lives that long; a client killed before it leaves the Node cordoned).
// The reboot: the kubelet stops (the Node goes NotReady: Talos's kubelet runs graceful node
// shutdown, which posts Ready=False "node is shutting down"; kwok stops playing the Node), apid
// answers nothing for TALOS_SIM_REBOOT_MS (default 2000), then the machine boots the new slot
// and the kubelet restarts the node's pods (same pod objects, containers started again: their
// Ready goes False until kwok starts them). An image the machine cannot boot (listed in
// $TALOS_SIM_STATE/unbootable-images, one reference per line) boots the old slot again: Talos's
// A/B fallback, the node runs its old version. NOT modelled: graceful shutdown's termination of
// the node's pods, staged upgrades (--stage), --reboot-mode, the image cache.
// The boot happens at the first talosctl call after its time (nothing runs between calls here):
// a node is never back sooner than a real one, and every call sees it back once its time passed.
const REBOOT_NOTE = 'node is shutting down'

function rebootMs() {
  return Number(process.env.TALOS_SIM_REBOOT_MS ?? 2000)
}

function listedIn(file, value) {
  const path = join(stateDir(), file)
  return (
    existsSync(path) &&
    readFileSync(path, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .includes(value)
  )
}

async function nodeObject(node) {
  return (await kube()).request('GET', `/api/v1/nodes/${nodeFor(node).metadata.name}`)
}

/** A read-modify-write of the Node (409: kwok's heartbeat wrote it meanwhile, read again). */
async function updateNode(node, change, subresource = '') {
  for (;;) {
    const live = await nodeObject(node)
    const next = change(structuredClone(live))
    if (!next) return live
    try {
      return await (await kube()).request('PUT', `/api/v1/nodes/${live.metadata.name}${subresource}`, {body: next})
    } catch (e) {
      if (e?.code !== 409) throw e
    }
  }
}

async function podsOn(node) {
  const name = nodeFor(node).metadata.name
  return (await (await kube()).request('GET', '/api/v1/pods', {query: {fieldSelector: `spec.nodeName=${name}`}})).items ?? []
}

/** The containers of the node's pods stop (or start again): Ready False until kwok starts them. */
async function podsNotReady(node) {
  for (const pod of await podsOn(node)) {
    if (pod.metadata.deletionTimestamp) continue
    const conditions = (pod.status?.conditions ?? []).map((c) => (c.type === 'Ready' || c.type === 'ContainersReady' ? {...c, status: 'False'} : c))
    try {
      await (
        await kube()
      ).request('PUT', `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}/status`, {
        body: {...pod, status: {...pod.status, conditions}},
      })
    } catch (e) {
      if (e?.code !== 404 && e?.code !== 409) throw e
    }
  }
}

/** The kubelet stops: kwok no longer plays the Node, which says it is shutting down. */
async function kubeletDown(node) {
  await updateNode(node, (n) => {
    n.metadata.annotations = {...n.metadata.annotations, [KWOK_NODE_ANNOTATION]: 'rebooting'}
    return n
  })
  await updateNode(
    node,
    (n) => {
      const now = new Date().toISOString()
      const ready = {type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: REBOOT_NOTE, lastHeartbeatTime: now, lastTransitionTime: now}
      n.status.conditions = [...(n.status?.conditions ?? []).filter((c) => c.type !== 'Ready'), ready]
      return n
    },
    '/status',
  )
  await podsNotReady(node)
}

/** The machine booted: the kubelet is back (kwok plays the Node again) and restarts its pods. */
async function kubeletUp(node) {
  await updateNode(node, (n) => {
    n.metadata.annotations = {...n.metadata.annotations, [KWOK_NODE_ANNOTATION]: 'fake'}
    return n
  })
  await podsNotReady(node)
}

/** Every node whose reboot time has passed boots now (the slot it installed, or the old one). */
async function bootDueNodes() {
  const dir = process.env.TALOS_SIM_STATE
  if (!dir || !existsSync(join(dir, 'nodes.json'))) return
  for (const decl of declaredNodes()) {
    const path = join(dir, `node-${decl.ip}.json`)
    const saved = readJson(path)
    if (!saved?.booting || Date.now() < saved.booting.at) continue
    const node = {...decl, ...saved, path}
    node.bootedVersion = node.talosVersion = node.booting.bootable ? node.booting.version : node.booting.from
    node.lastBoot = {image: node.booting.image, slot: node.booting.bootable ? 'new' : 'old (the new one failed to boot)'}
    delete node.booting
    node.rebootUntil = undefined
    await kubeletUp(node)
    saveNode(node)
  }
}

async function upgradeTalos(args) {
  const what = 'error during upgrade'
  const ip = requireNode(args, what)
  const node = loadNode(ip, what)
  requireConfigured(node, args, what)
  if (!versionAtLeast(node.talosVersion, 1, 13)) fail(`the talosctl simulator does not model the legacy upgrade path (node ${ip} runs ${node.talosVersion})`)
  const image = args.one('image') ?? fail('error during upgrade: an upgrade image is required (--image)')
  const version = tagOf(image) ? `v${tagOf(image)}` : fail(`error pulling upgrade image: invalid reference format: "${image}"`)
  if (listedIn('missing-images', image)) fail(`error pulling upgrade image: error from node ${ip}: failed to resolve reference "${image}": not found`)
  say(`${ip}: pulling ${image}`)
  say(`${ip}: upgrade completed`)
  const drain = args.bool('no-reboot') ? false : args.flags.drain === undefined || args.bool('drain')
  if (drain) await cordonAndDrain(node, args)
  if (args.bool('no-reboot')) return
  node.booting = {version, from: node.talosVersion, image, bootable: !listedIn('unbootable-images', image), at: Date.now() + rebootMs()}
  node.rebootUntil = node.booting.at
  saveNode(node)
  say(`${ip}: rebooting`)
  await kubeletDown(node)
  // --wait (forced by --drain): the client waits for the node to come back.
  while (Date.now() < node.booting.at) await sleep(100)
  await bootDueNodes()
  say(`${ip}: post check passed`)
  if (!drain) return
  const deadline = Date.now() + 10 * 60_000
  while (!(await nodeObject(node)).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) {
    if (Date.now() > deadline) fail(`error waiting for node "${nodeFor(node).metadata.name}" to become Ready`)
    await sleep(200)
  }
  // drain.go uncordons every node it drained, whether it was cordoned before or not.
  await updateNode(node, (n) => (n.spec.unschedulable ? ((n.spec.unschedulable = false), n) : undefined))
  say(`${nodeFor(node).metadata.name}: node uncordoned`)
}

async function cordonAndDrain(node, args) {
  const name = nodeFor(node).metadata.name
  const timeoutMs = parseDuration(args.one('drain-timeout') ?? '5m')
  await updateNode(node, (n) => (n.spec.unschedulable ? undefined : ((n.spec.unschedulable = true), n)))
  say(`${name}: node cordoned`)
  const deadline = Date.now() + timeoutMs
  const daemonSetPod = (p) => (p.metadata.ownerReferences ?? []).some((o) => o.controller && o.kind === 'DaemonSet')
  const mirror = (p) => p.metadata.annotations?.['kubernetes.io/config.mirror'] !== undefined
  for (const pod of (await podsOn(node)).filter((p) => !daemonSetPod(p) && !mirror(p) && !p.metadata.deletionTimestamp)) {
    const path = `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`
    for (;;) {
      try {
        await (
          await kube()
        ).request('POST', `${path}/eviction`, {
          body: {apiVersion: 'policy/v1', kind: 'Eviction', metadata: {name: pod.metadata.name, namespace: pod.metadata.namespace}},
        })
        break
      } catch (e) {
        if (e?.code === 404) break
        if (e?.code !== 429) throw e
        if (Date.now() > deadline)
          fail(
            `error draining node "${name}": [error when evicting pods/"${pod.metadata.name}" -n "${pod.metadata.namespace}": global timeout reached: ${args.one('drain-timeout') ?? '5m0s'}]`,
          )
        say(
          `${name}: error when evicting pods/"${pod.metadata.name}" -n "${pod.metadata.namespace}" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.`,
        )
        await sleep(Math.min(5000, Math.max(0, deadline - Date.now())))
      }
    }
  }
  say(`${name}: node drained`)
}

function parseDuration(text) {
  const m = /^(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(text)
  if (!m || text === '') fail(`invalid argument "${text}" for "--drain-timeout" flag: time: invalid duration "${text}"`)
  return (Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0)) * 1000
}

// ---------- etcd ----------

/** A member's id as talosctl prints it (etcdresource.FormatMemberID: %016x); here made of the address. */
function memberId(ip) {
  return ip
    .split('.')
    .map((n) => Number(n).toString(16).padStart(2, '0'))
    .join('')
    .padStart(16, '0')
}

/**
 * The etcd members: every control plane that runs a config and whose member has not left (a new
 * one joins when configured). A machine that went off with its config (`shutdown`, a dead disk)
 * stays a member, not started: only a leave or a remove-member takes it out.
 */
function etcdMembers() {
  if (!isBootstrapped()) return []
  return declaredNodes()
    .map(loadNodeFile)
    .filter((n) => (n.mode === 'configured' || (n.mode === 'off' && n.config)) && isControlPlane(n) && !n.etcdLeft)
}

/** A member counts as started when its machine runs and the test did not mark it unhealthy (etcd-errors-<ip>). */
const isStarted = (m) => m.mode === 'configured' && !existsSync(join(stateDir(), `etcd-errors-${m.ip}`))

/**
 * A control plane configured after bootstrap joins a running etcd as a learner
 * (internal/app/machined/pkg/system/services/etcd.go, v1.14: MemberAddAsLearner, then
 * promoteMember retries PromoteMember until etcd takes it, which it does once the learner's log
 * has caught up). Here the learner is promoted TALOS_SIM_LEARNER_MS (default 1500) after it joined.
 */
function isLearner(node) {
  return !!node.etcdJoinedAt && Date.now() < node.etcdJoinedAt + Number(process.env.TALOS_SIM_LEARNER_MS ?? 1500)
}

/** The node's own member must be running (the local client of EtcdMemberList QueryLocal, EtcdStatus). */
function requireRunningEtcd(node, what) {
  if (!isControlPlane(node)) fail(`${what}: rpc error: code = Unimplemented desc = etcd is only available on control plane nodes`)
  if (!isBootstrapped() || node.etcdLeft) fail(`${what}: rpc error: code = Unavailable desc = etcd is not running`)
}

/**
 * `etcd members`, as talosctl v1.14 prints it (cmd/talosctl/cmd/talos/etcd.go etcdMemberListCmd,
 * v1.14.0-rc.1): each node asked answers its local member's view (QueryLocal), one tabwriter row
 * (padding 3) per member; a node that fails is "error from node <ip>: <error>" on stderr, exit 1.
 */
function etcdMembersCmd(args) {
  const nodes = args.list('nodes')
  if (nodes.length === 0) fail('failed to determine endpoints: nodes are not set for the command')
  const rows = [['NODE', 'ID', 'HOSTNAME', 'PEER URLS', 'CLIENT URLS', 'LEARNER']]
  const errors = []
  for (const ip of nodes) {
    try {
      const node = loadNode(ip, `error from node ${ip}`)
      requireConfigured(node, args, `error from node ${ip}`)
      requireRunningEtcd(node, `error from node ${ip}`)
      for (const m of etcdMembers())
        rows.push([ip, memberId(m.ip), nodeFor(m).metadata.name, `https://${m.ip}:2380`, `https://${m.ip}:2379`, String(isLearner(m))])
    } catch (error) {
      if (!(error instanceof CliError)) throw error
      errors.push(error.message)
    }
  }
  printTable(rows)
  if (errors.length) fail(errors.join('\n'))
}

/**
 * The node's member leaves: internal/pkg/etcd/etcd.go LeaveCluster (v1.14.0-rc.1) removes the
 * local member (MemberRemove), stops etcd and empties its data folder. etcd refuses to remove
 * a voting member when the members left would not have quorum of started members
 * (etcdserver mayRemoveMember / IsReadyToRemoveVotingMember: ErrNotEnoughStartedMembers), the
 * last member included, and Talos returns that error at once (only ErrUnhealthy and ErrStopped
 * are retried). A member a test marks unhealthy (etcd-errors-<ip>) counts as not started.
 */
function leaveEtcd(node, what) {
  // A learner is not a voting member: it neither counts towards quorum nor needs one (etcdserver mayRemoveMember).
  const others = etcdMembers().filter((m) => m.ip !== node.ip && !isLearner(m))
  const started = others.filter(isStarted).length
  if (!isLearner(node) && started < Math.floor(others.length / 2) + 1)
    fail(
      `${what}: rpc error: code = Unknown desc = failed to leave cluster: failed to remove member ${BigInt(`0x${memberId(node.ip)}`)}: etcdserver: re-configuration failed due to not enough started members`,
    )
  node.etcdLeft = true
  saveNode(node)
}

/** `etcd leave`: exactly one node (BuildClientEnforceSingleNode), a control plane (CheckControlplane), its member leaves. */
function etcdLeaveCmd(args) {
  const nodes = args.list('nodes')
  if (nodes.length !== 1) fail(`command "etcd leave" requires exactly one node (got ${nodes.length})`)
  const what = 'error leaving etcd'
  const node = loadNode(nodes[0], what)
  requireConfigured(node, args, what)
  if (!isControlPlane(node)) fail(`${what}: rpc error: code = Unimplemented desc = etcd leave is only available on control plane nodes`)
  if (node.etcdLeft) return // LeaveCluster: the member is not found, nothing to do; etcd is stopped already
  requireRunningEtcd(node, what)
  leaveEtcd(node, what)
}

/**
 * `etcd remove-member <id>` (talosctl v1.14 etcd.go etcdMemberRemoveCmd; machined
 * EtcdRemoveMemberByID, v1alpha1_server.go): a control plane removes another member by its hex
 * ID through the control planes' etcd, for a member whose machine cannot `etcd leave` itself. etcd
 * refuses when the members that stay lack a started quorum (as for a leave); an ID that is no
 * member is NotFound. The removed machine's etcd, if it ever runs again, is no member.
 */
function etcdRemoveMemberCmd(args) {
  const id = args.positionals[2] ?? fail('accepts 1 arg(s), received 0')
  const nodes = args.list('nodes')
  if (nodes.length === 0) fail('failed to determine endpoints: nodes are not set for the command')
  const errors = []
  for (const ip of nodes) {
    try {
      const what = `error from node ${ip}`
      const node = loadNode(ip, what)
      requireConfigured(node, args, what)
      if (!isControlPlane(node)) fail(`${what}: rpc error: code = Unimplemented desc = etcd remove member is only available on control plane nodes`)
      if (!isBootstrapped()) fail(`${what}: rpc error: code = Unavailable desc = etcd is not running`)
      const target = etcdMembers().find((m) => memberId(m.ip) === id.toLowerCase())
      if (!target) fail(`${what}: rpc error: code = NotFound desc = etcdserver: member not found`)
      const others = etcdMembers().filter((m) => m.ip !== target.ip && !isLearner(m))
      if (!isLearner(target) && others.filter(isStarted).length < Math.floor(others.length / 2) + 1)
        fail(`${what}: failed to remove member: etcdserver: re-configuration failed due to not enough started members`)
      const file = loadNodeFile(target)
      file.etcdLeft = true
      saveNode(file)
    } catch (error) {
      if (!(error instanceof CliError)) throw error
      errors.push(error.message)
    }
  }
  if (errors.length) fail(errors.join('\n'))
}

/**
 * `etcd snapshot <path>` (talosctl v1.14 cmd/talosctl/cmd/talos/etcd.go etcdSnapshotCmd; machined
 * EtcdSnapshot in internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go): exactly one
 * node (BuildClientEnforceSingleNode), a control plane (CheckControlplane) whose etcd runs. The
 * snapshot is the real one of the harness's etcd ($TALOS_SIM_ETCD_ENDPOINT), read through etcd's
 * Maintenance.Snapshot API as machined's local client reads it (here through etcd's gRPC gateway,
 * POST /v3/maintenance/snapshot), which ends with etcd's sha256 trailer. talosctl writes PATH.part
 * (0600), checks the trailer's place (size % 512 == 32), renames it to PATH and prints two lines,
 * the second from etcdutl's snapshot Status: here the real etcdutl ($TALOS_SIM_ETCDUTL).
 */
async function etcdSnapshotCmd(args) {
  const path = args.positionals[2] ?? fail('accepts 1 arg(s), received 0')
  const nodes = args.list('nodes')
  if (nodes.length !== 1) fail(`command "etcd snapshot" requires exactly one node (got ${nodes.length})`)
  const node = loadNode(nodes[0], 'error reading file')
  requireConfigured(node, args, 'error reading file')
  if (!isControlPlane(node)) fail('error reading: rpc error: code = Unimplemented desc = etcd snapshot is only available on control plane nodes')
  if (!isBootstrapped() || node.etcdLeft || !isStarted(node))
    fail('error reading: rpc error: code = Unknown desc = failed to create etcd client: etcd is not running')
  const endpoint = process.env.TALOS_SIM_ETCD_ENDPOINT ?? fail('TALOS_SIM_ETCD_ENDPOINT is not set (the harness etcd)')
  const part = `${path}.part`
  try {
    const res = await fetch(`${endpoint}/v3/maintenance/snapshot`, {method: 'POST', body: '{}'})
    if (!res.ok) fail(`error reading: rpc error: code = Unknown desc = failed reading etcd snapshot: ${res.status} ${await res.text()}`)
    // The gateway streams one JSON object per message: {"result": {"blob": base64, "remaining_bytes": ...}} or {"error": ...}.
    const chunks = []
    for (const line of (await res.text()).split('\n')) {
      if (!line.trim()) continue
      const message = JSON.parse(line)
      if (message.error) fail(`error reading: rpc error: code = Unknown desc = failed reading etcd snapshot: ${message.error.message}`)
      if (message.result?.blob) chunks.push(Buffer.from(message.result.blob, 'base64'))
    }
    const bytes = Buffer.concat(chunks)
    writeFileSync(part, bytes, {mode: 0o600})
    if (bytes.length % 512 !== 32) fail(`sha256 checksum not found (size ${bytes.length})`)
    renameSync(part, path)
    process.stdout.write(`etcd snapshot saved to ${JSON.stringify(path)} (${bytes.length} bytes)\n`)
  } finally {
    rmSync(part, {force: true})
  }
  process.stdout.write(`snapshot info: ${snapshotStatus(path)}\n`)
}

/** etcdutl's snapshot Status of a file, as talosctl prints it: `hash %08x, revision %d, total keys %d, total size %d`. */
function snapshotStatus(path) {
  const etcdutl = process.env.TALOS_SIM_ETCDUTL ?? fail('TALOS_SIM_ETCDUTL is not set (the real etcdutl reads the snapshot status)')
  const status = spawnSync(etcdutl, ['snapshot', 'status', path, '-w', 'json'], {encoding: 'utf8'})
  if (status.status !== 0) fail(status.stderr.trim() || `etcdutl snapshot status exited ${status.status}`)
  const s = JSON.parse(status.stdout)
  return `hash ${(s.hash >>> 0).toString(16).padStart(8, '0')}, revision ${s.revision}, total keys ${s.totalKey}, total size ${s.totalSize}`
}

/**
 * `bootstrap --recover-from PATH` (talosctl v1.14 cmd/talosctl/cmd/talos/bootstrap.go): talosctl
 * reads the file's status with etcdutl first (a file that is no snapshot never leaves the
 * laptop), prints it, uploads it (EtcdRecover), then asks Bootstrap with RecoverEtcd; machined's
 * etcd service restores it into the empty data folder with etcdutl's snapshot Restore as a
 * one-member cluster (recoverFromSnapshot, internal/app/machined/pkg/system/services/etcd.go) and
 * starts etcd from it. Here the harness does that to its real etcd (cluster.ts, after
 * loseEverything()): the file goes to $TALOS_SIM_STATE/etcd-recover.snapshot with a request
 * beside it, and the call returns once the harness says the control plane runs again.
 */
async function recoverEtcd(path, ip) {
  if (!existsSync(path)) fail(`open ${path}: no such file or directory`)
  process.stdout.write(`recovering from snapshot ${JSON.stringify(path)}: ${snapshotStatus(path)}\n`)
  const snapshot = join(stateDir(), 'etcd-recover.snapshot')
  writeFileSync(snapshot, readFileSync(path), {mode: 0o600})
  const done = join(stateDir(), 'etcd-recover.done')
  rmSync(done, {force: true})
  writeFileSync(join(stateDir(), 'etcd-recover.request'), JSON.stringify({snapshot}))
  // The Bootstrap call has reached the node: from here on it is bootstrapping (a second one is AlreadyExists), whatever becomes of this talosctl.
  writeFileSync(join(stateDir(), 'bootstrapped'), JSON.stringify({node: ip, recovered: true}))
  const deadline = Date.now() + 120_000
  while (!existsSync(done)) {
    if (Date.now() > deadline) fail('error executing bootstrap: the harness did not recover etcd within 120 s')
    await sleep(100)
  }
  const outcome = JSON.parse(readFileSync(done, 'utf8'))
  if (outcome.error) fail(`error executing bootstrap: error recovering from the snapshot: ${outcome.error}`)
}

// ---------- shutdown ----------
// talosctl v1.14 `shutdown [--force]` (cmd/talosctl/cmd/talos/shutdown.go): the machine powers
// off. Here it is also how a test makes a machine die (a dead disk, a pulled plug): it answers
// nothing any more, its kubelet is gone (kwok stops playing its Node), and a control plane's etcd
// member stays in the member list, not started, with its config kept on the dead disk.
async function shutdownNode(args) {
  const what = 'error executing shutdown'
  const ip = requireNode(args, what)
  const node = loadNode(ip, what)
  requireConfigured(node, args, what)
  if (isBootstrapped()) await kubeletDown(node)
  node.mode = 'off'
  saveNode(node)
}

function printTable(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)))
  process.stdout.write(
    rows
      .map((r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] + 3)))
          .join('')
          .trimEnd(),
      )
      .join('\n') + '\n',
  )
}

// ---------- reset ----------
// talosctl v1.14 `reset` (cmd/talosctl/cmd/talos/reset.go, v1.14.0-rc.1): --graceful (default
// true) and --reboot (default false); the client waits (--wait) until the node is back in
// maintenance mode (with --reboot) or gone. The machine runs the Reset sequence
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer.go Reset): when graceful, cordon
// and drain (errors only logged), then on a control plane LeaveEtcd (a failure fails the reset:
// the node keeps running configured), then the system disk is wiped; after the reboot the machine
// has no config: maintenance mode. Its kubelet is gone: kwok stops playing the Node, which stays
// NotReady until someone deletes it (Talos never deletes its Node).
async function resetNode(args) {
  const what = 'error executing reset'
  const ip = requireNode(args, what)
  const node = loadNode(ip, what)
  requireConfigured(node, args, what)
  const graceful = args.flags.graceful === undefined || args.bool('graceful')
  if (graceful && isBootstrapped()) {
    try {
      await cordonAndDrain(node, args)
    } catch (e) {
      if (!(e instanceof CliError)) throw e
      log(`${ip}: drain: ${e.message}`) // taskErrorHandler(logError, CordonAndDrainNode)
    }
    if (isControlPlane(node) && !node.etcdLeft) leaveEtcd(node, what)
  }
  say(`${ip}: resetting`)
  await kubeletDown(node)
  const reboot = args.bool('reboot')
  node.mode = reboot ? 'maintenance' : 'off'
  node.config = null
  node.configVersion = 0
  node.etcdLeft = undefined
  node.etcdJoinedAt = undefined
  node.rebootUntil = reboot ? Date.now() + rebootMs() : undefined
  for (const f of [`manifeststatus-${ip}.json`]) rmSync(join(stateDir(), f), {force: true})
  saveNode(node)
  const wait = args.flags.wait === undefined || args.bool('wait')
  if (!wait || !reboot) return
  while (Date.now() < node.rebootUntil) await sleep(100)
  say(`${ip}: post check passed`)
}

// ---------- etcd status ----------
// talosctl v1.14 cmd/talosctl/cmd/talos/etcd.go `etcdStatusCmd` (v1.14.0-rc.1): a tabwriter
// table (padding 3) of one row per node that answered, "error from node <ip>: <error>" for each
// one that did not (joined on stderr, exit 1). The member of a node is its own; a worker runs
// no etcd. A test makes a member report errors by writing them to
// $TALOS_SIM_STATE/etcd-errors-<ip> (what etcd's Status answers in `errors`, e.g. a raft alarm).
function etcdStatus(args) {
  const nodes = args.list('nodes')
  if (nodes.length === 0) fail('failed to determine endpoints: nodes are not set for the command')
  const rows = [['NODE', 'MEMBER', 'DB SIZE', 'IN USE', 'LEADER', 'RAFT INDEX', 'RAFT TERM', 'RAFT APPLIED INDEX', 'LEARNER', 'PROTOCOL', 'STORAGE', 'ERRORS']]
  const errors = []
  const leader = etcdMembers()[0]?.ip
  for (const ip of nodes) {
    try {
      const node = loadNode(ip, `error from node ${ip}`)
      requireConfigured(node, args, `error from node ${ip}`)
      if (!isControlPlane(node)) fail(`error from node ${ip}: rpc error: code = Unknown desc = etcd is not running on this node`)
      if (!isBootstrapped() || node.etcdLeft) fail(`error from node ${ip}: rpc error: code = Unavailable desc = etcd is not running`)
      const file = join(stateDir(), `etcd-errors-${ip}`)
      const problems = existsSync(file) ? readFileSync(file, 'utf8').trim() : ''
      rows.push([ip, memberId(ip), '4.2 MB', '3.1 MB (73.81%)', memberId(leader), '4711', '2', '4711', String(isLearner(node)), '3.6.0', '3.6.0', problems])
    } catch (error) {
      if (!(error instanceof CliError)) throw error
      errors.push(error.message)
    }
  }
  printTable(rows)
  if (errors.length) fail(errors.join('\n'))
}

// ---------- commands ----------

function log(line) {
  process.stderr.write(`${line}\n`)
}

function simVersion() {
  return process.env.TALOS_SIM_CLIENT_VERSION ?? 'v1.14.1'
}

/**
 * `version`, for one node or several (`-n a,b,c`), as talosctl v1.14.1 does
 * (cmd/talosctl/cmd/talos/version.go): "Client:" and the client's version, "Server:", then
 * each node that answers a block of its own (`\tNODE:        <ip>`, then its version lines,
 * pkg/machinery/version WriteLongVersionFromExisting); every node is asked on its own
 * (multiplex.UnaryViaFactory), and one that fails is "error getting version from node <ip>:
 * <error>", the errors joined (one per line) on stderr after the output, exit 1.
 */
function version(args) {
  const client = `Client:\n\tTag:         ${simVersion()} (talosctl simulator)\n`
  if (args.bool('client')) return void process.stdout.write(client)
  const nodes = args.list('nodes')
  if (nodes.length === 0)
    fail(
      'failed to determine endpoints: nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes to run the command against',
    )
  const blocks = []
  const errors = []
  for (const ip of nodes) {
    try {
      const node = loadNode(ip, `error getting version from node ${ip}`)
      requireConfigured(node, args, `error getting version from node ${ip}`)
      blocks.push(`\tNODE:        ${ip}\n\tTag:         v${node.talosVersion.replace(/^v/, '')}\n\tEnabled:     RBAC\n`)
    } catch (error) {
      if (!(error instanceof CliError)) throw error
      errors.push(error.message)
    }
  }
  process.stdout.write(`${client}Server:\n${blocks.join('')}`)
  if (errors.length) fail(errors.join('\n'))
}

/**
 * Test knobs to replay a race between two operators (never set outside a test that needs them):
 * TALOS_SIM_APPLY_GATE names a file every apply waits for, so two runs' applies start together
 * (each waiter leaves `<gate>.waiting-<pid>` saying its node and delay);
 * TALOS_SIM_APPLY_DELAY ("ip=ms,...") then holds this process's apply to one node back, as a slow
 * link would.
 */
async function waitForApplyKnobs(ip) {
  const gate = process.env.TALOS_SIM_APPLY_GATE
  if (gate && !existsSync(gate)) {
    // Says who waits (node and delay), so the test opens the gate once every run is held at it.
    writeFileSync(`${gate}.waiting-${process.pid}`, `${ip} ${process.env.TALOS_SIM_APPLY_DELAY ?? ''}`)
    while (!existsSync(gate)) await sleep(50)
  }
  const delay = (process.env.TALOS_SIM_APPLY_DELAY ?? '')
    .split(',')
    .map((d) => d.split('='))
    .find(([node]) => node === ip)
  if (delay) await sleep(Number(delay[1]))
}

/**
 * One apply at a time per node: machined's ApplyConfiguration takes applyConfigMu with TryLock and
 * answers a concurrent call with FailedPrecondition (siderolabs/talos
 * internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go, main after v1.14). The lock
 * file names its holder's pid, so a simulator process killed mid-apply does not hold it forever.
 */
async function withApplyLock(node, fn) {
  const lock = `${node.path}.apply-lock`
  try {
    writeFileSync(lock, String(process.pid), {flag: 'wx'})
  } catch {
    const holder = Number(readFileSync(lock, 'utf8'))
    if (isAlive(holder))
      fail('error applying new configuration: rpc error: code = FailedPrecondition desc = another apply configuration is already in progress')
    writeFileSync(lock, String(process.pid))
  }
  try {
    return await fn()
  } finally {
    rmSync(lock, {force: true})
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function applyConfig(args) {
  const ip = requireNode(args, 'error applying new configuration')
  // The client's flag parsing first: talosctl v1.14 has no `reboot` mode (siderolabs/talos
  // 995bc30d5 "drop apply config method reboot", v1.14.0-rc.1 cmd/talosctl/pkg/talos/helpers/mode.go).
  const mode = args.one('mode') ?? 'auto'
  if (!APPLY_MODES.includes(mode)) fail(`invalid argument "${mode}" for "-m, --mode" flag: possible options are: ${APPLY_MODES.join(', ')}`)
  loadNode(ip, 'error applying new configuration')
  const file = args.one('file') ?? fail('apply-config: required flag(s) "file" not set')
  const text = readFileSync(file, 'utf8')
  await waitForApplyKnobs(ip)
  // Read the node under its lock: another operator's apply may have configured it meanwhile.
  const node = loadNode(ip, 'error applying new configuration')
  return withApplyLock(node, () => {
    const current = loadNode(ip, 'error applying new configuration')
    const docs = parseDocs(text, `error applying new configuration: failed to parse config`)
    const type = machineType(docs) ?? fail('error applying new configuration: the config has no machine.type')
    if ((type === 'worker') !== (current.role === 'worker'))
      fail(`error applying new configuration: the simulated node ${ip} is a ${current.role}, the config is for ${type}`)
    if (args.bool('insecure')) {
      if (current.mode !== 'maintenance') requireConfigured(current, args, 'error applying new configuration')
    } else requireConfigured(current, args, 'error applying new configuration')
    if (current.mode === 'configured') return applyToConfigured(current, text, docs, mode, args.bool('dry-run'))
    // A machine in maintenance mode accepts the config, then installs onto its install disk
    // (v1alpha1_sequencer_tasks.go Install, v1.14.1): with no such disk the install fails ("no
    // disks matched the expression", or the disk path does not resolve) and the machine never
    // comes up configured. Here it stays in maintenance mode and the failure is kept for tests.
    const install = current.mode === 'maintenance' ? installDiskOf(docs, disksOf(current)) : undefined
    if (install && !install.disk) {
      current.installError = install.error
      saveNode(current)
      process.stderr.write('Applied configuration without a reboot\n')
      return
    }
    current.mode = 'configured'
    current.config = text
    current.configVersion = (current.configVersion ?? 0) + 1
    if (isControlPlane(current) && isBootstrapped()) current.etcdJoinedAt = Date.now()
    saveNode(current)
    return afterConfigChange(current)
  })
}

const APPLY_MODES = ['auto', 'no-reboot', 'staged', 'try']

/**
 * A new config for a running machine, as machined's ApplyConfiguration decides
 * (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go): from v1.14.0 (v1.14.0-rc.1)
 * auto and no-reboot both apply without a reboot, whatever changed; below v1.14 (v1.13.0)
 * CanApplyImmediate decides: no-reboot refuses a change it does not let through, auto turns into
 * a reboot. The talosctl client prints ModeDetails on stderr (helpers.PrintApplyResults); a dry
 * run answers "Dry run summary:", the mode, and configdiff's diff of the configs. `staged` and
 * `try` are not modelled (ichor uses neither): refused, never faked.
 */
async function applyToConfigured(node, text, docs, mode, dryRun) {
  if (mode === 'staged' || mode === 'try') fail(`the talosctl simulator does not model apply-config --mode ${mode}`)
  const blocked = versionAtLeast(node.talosVersion, 1, 14) ? undefined : notImmediate(parseDocs(node.config, 'machine config'), docs)
  if (blocked && mode === 'no-reboot')
    fail(`error applying new configuration: rpc error: code = InvalidArgument desc = this config change can't be applied in immediate mode\ndiff:\n${blocked}`)
  const reboot = blocked !== undefined
  const details = reboot ? 'Applied configuration with a reboot' : 'Applied configuration without a reboot'
  if (dryRun) {
    const diff = textDiff(node.config, text)
    process.stderr.write(`Dry run summary:\n${details} (skipped in dry-run).\nConfig diff:\n\n${diff || 'No changes.'}\n`)
    return
  }
  node.config = text
  node.configVersion = (node.configVersion ?? 0) + 1
  if (reboot) node.rebootUntil = Date.now() + Number(process.env.TALOS_SIM_REBOOT_MS ?? 2000)
  saveNode(node)
  process.stderr.write(`${details}\n`)
  return afterConfigChange(node)
}

// The v1alpha1 fields CanApplyImmediate copies from the running config before comparing
// (internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go, the same list in v1.12.6 and
// v1.13.0): a change anywhere else in the v1alpha1 document needs a reboot. Other documents are
// not compared there.
const IMMEDIATE_MACHINE = [
  'ca',
  'acceptedCAs',
  'time',
  'certSANs',
  'install',
  'network',
  'sysfs',
  'sysctls',
  'logging',
  'controlPlane',
  'kubelet',
  'kernel',
  'registries',
  'pods',
  'seccompProfiles',
  'nodeAnnotations',
  'nodeLabels',
  'nodeTaints',
]
const IMMEDIATE_FEATURES = ['kubernetesTalosAPIAccess', 'kubePrism', 'hostDNS', 'imageCache', 'nodeAddressSortAlgorithm']

/** The diff when the v1alpha1 change cannot be applied without a reboot, else undefined. */
function notImmediate(currentDocs, newDocs) {
  const current = currentDocs.find(isLegacy)
  const next = newDocs.find(isLegacy)
  if (!current || !next) return 'new config is not v1alpha1'
  const masked = clone(next)
  masked.debug = current.debug
  masked.cluster = current.cluster
  if (isObj(masked.machine) && isObj(current.machine)) {
    for (const k of IMMEDIATE_MACHINE) masked.machine[k] = current.machine[k]
    if (isObj(masked.machine.features) && isObj(current.machine.features))
      for (const k of IMMEDIATE_FEATURES) masked.machine.features[k] = current.machine.features[k]
  }
  const strip = (v) => JSON.parse(JSON.stringify(v)) // undefined fields are absent ones, as omitempty encodes them
  return isDeepStrictEqual(strip(current), strip(masked)) ? undefined : textDiff(renderDocs([current]), renderDocs([masked]))
}

/** A line diff in the shape of pkg/machinery/textdiff (a unified diff of the two YAML texts), without hunk offsets. */
function textDiff(before, after) {
  const a = (before ?? '').split('\n')
  const b = after.split('\n')
  if (before === after) return ''
  // Longest common subsequence, small configs only.
  const n = a.length
  const m = b.length
  const lcs = Array.from({length: n + 1}, () => new Int32Array(m + 1))
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
  const out = ['--- a', '+++ b']
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      i++
      j++
    } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) out.push(`+${b[j++]}`)
    else out.push(`-${a[i++]}`)
  }
  return out.join('\n')
}

async function bootstrap(args) {
  const ip = requireNode(args, 'error executing bootstrap')
  const node = loadNode(ip, 'error executing bootstrap')
  requireConfigured(node, args, 'error executing bootstrap')
  if (!isControlPlane(node)) fail('error executing bootstrap: rpc error: code = FailedPrecondition desc = bootstrap is not available on worker nodes')
  if (isBootstrapped()) fail('error executing bootstrap: rpc error: code = AlreadyExists desc = etcd data directory is not empty')
  const recoverFrom = args.one('recover-from')
  if (recoverFrom) await recoverEtcd(recoverFrom, ip)
  else writeFileSync(join(stateDir(), 'bootstrapped'), JSON.stringify({node: ip}))
  // The API server is up: every configured machine's kubelet registers its Node.
  for (const decl of declaredNodes()) await syncKubelet(await kube(), loadNode(decl.ip, 'bootstrap'))
  // Every configured control plane runs the manifest controller once etcd is up.
  for (const decl of declaredNodes()) {
    const cp = loadNode(decl.ip, 'bootstrap')
    if (cp.mode === 'configured' && isControlPlane(cp)) await nodeApplyManifests(cp)
  }
}

function kubeconfig(args) {
  const ip = requireNode(args, 'error fetching kubeconfig')
  const node = loadNode(ip, 'error fetching kubeconfig')
  requireConfigured(node, args, 'error fetching kubeconfig')
  if (!isBootstrapped()) fail('error fetching kubeconfig: rpc error: code = NotFound desc = kubeconfig is not available before bootstrap')
  // What the operator gets may reach the apiserver another way than the nodes do (the harness's proxy).
  const source = process.env.TALOS_SIM_CLIENT_KUBECONFIG || process.env.TALOS_SIM_KUBECONFIG || fail('TALOS_SIM_KUBECONFIG is not set')
  let out = args.positionals[1] ?? fail('kubeconfig: the simulator needs an explicit output path')
  if (existsSync(out) && statSync(out).isDirectory()) out = join(out, 'kubeconfig')
  if (existsSync(out) && !args.bool('force')) fail(`kubeconfig file already exists, use --force to overwrite: ${out}`)
  writeFileSync(out, stringify(talosKubeconfig(parseDocs(readFileSync(source, 'utf8'), 'kubeconfig')[0], node)), {mode: 0o600})
}

/**
 * The admin kubeconfig in the shape Talos generates it (pkg/kubeconfig/generate.go GenerateAdmin,
 * v1.14.0-rc.1): cluster `<clusterName>`, user `admin@<clusterName>`, context `admin@<clusterName>`
 * in namespace default, current. The server and credentials are the harness's.
 */
function talosKubeconfig(source, node) {
  // v1alpha1 `cluster.clusterName`, or the v1.14 contract's KubeClusterConfig document `clusterName`.
  const docs = parseDocs(node.config, 'machine config')
  const name = docs.find(isLegacy)?.cluster?.clusterName ?? docs.find((d) => d.kind === 'KubeClusterConfig')?.clusterName
  if (!name) fail('error fetching kubeconfig: the machine config names no cluster')
  const current = source.contexts.find((c) => c.name === source['current-context']) ?? source.contexts[0]
  const cluster = source.clusters.find((c) => c.name === current.context.cluster)
  const user = source.users.find((u) => u.name === current.context.user)
  const admin = `admin@${name}`
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{name, cluster: cluster.cluster}],
    users: [{name: admin, user: user.user}],
    contexts: [{name: admin, context: {cluster: name, namespace: 'default', user: admin}}],
    'current-context': admin,
  }
}

/**
 * `talosctl get manifeststatus`: the ManifestStatus resource (controlplane namespace, id
 * "manifests", spec.manifestsApplied) the ManifestApplyController writes after each run
 * (pkg/machinery/resources/k8s/manifest_status.go, v1.14.1). None on a worker.
 */
function getManifestStatus(args) {
  const ip = requireNode(args, 'error getting resources')
  const node = loadNode(ip, 'error getting resources')
  requireConfigured(node, args, 'error getting resources')
  if ((args.one('output') ?? 'yaml') !== 'yaml') fail('the simulator only answers `get manifeststatus -o yaml`')
  const status = readManifestStatus(ip)
  if (!status) return
  process.stdout.write(
    stringify({
      node: ip,
      metadata: {
        namespace: 'controlplane',
        type: 'ManifestStatuses.kubernetes.talos.dev',
        id: 'manifests',
        version: 1,
        owner: 'k8s.ManifestApplyController',
        phase: 'running',
      },
      spec: {manifestsApplied: status.manifestsApplied},
    }),
  )
}

/**
 * `get machineconfig -o yaml`, for one node or several (`-n a,b,c`), as talosctl v1.14.1 does
 * (cmd/talosctl/cmd/talos/get.go getResources, listResources; output/yaml.go): the resource
 * kind is resolved on the first node, and an error there ends the command with no output; then
 * node by node, each resource a YAML document starting with `node: <ip>`, `---` between them;
 * a node that fails is skipped with "error listing resources on node <ip>: <error>", the
 * errors joined (errors.Join: one per line) on stderr after the output, exit 1.
 */
function getMachineConfig(args) {
  const [, type] = args.positionals
  if (['manifeststatus', 'manifeststatuses'].includes(type)) return getManifestStatus(args)
  if (['disks', 'disk'].includes(type)) return getDisks(args)
  if (!['machineconfig', 'machineconfigs', 'mc'].includes(type)) fail(`the simulator only answers \`get machineconfig\` (got ${type})`)
  if ((args.one('output') ?? 'yaml') !== 'yaml') fail('the simulator only answers `get machineconfig -o yaml`')
  const nodes = args.list('nodes')
  // Every read is logged (not a Talos behaviour: the tests count a run's reads per node).
  if (nodes.length > 0) appendFileSync(join(stateDir(), 'machineconfig-reads.log'), `${nodes.join(',')}\n`)
  if (nodes.length === 0)
    fail(
      'error getting resources: nodes are not set for the command: please use `--nodes` flag or configuration file to set the nodes to run the command against',
    )
  const read = (ip, what) => {
    const node = loadNode(ip, what)
    requireConfigured(node, args, what)
    return stringify({
      node: ip,
      metadata: {namespace: 'config', type: 'MachineConfigs.config.talos.dev', id: 'v1alpha1', version: node.configVersion, owner: null, phase: 'running'},
      spec: node.config,
    })
  }
  // The first node resolves the kind: its failure is the command's, nothing printed.
  const docs = [read(nodes[0], 'error getting resources')]
  const errors = []
  for (const ip of nodes.slice(1)) {
    try {
      docs.push(read(ip, `error listing resources on node ${ip}`))
    } catch (error) {
      if (!(error instanceof CliError)) throw error
      errors.push(error.message)
    }
  }
  process.stdout.write(docs.join('---\n'))
  if (errors.length) fail(errors.join('\n'))
}

const DEFAULT_DISKS = ['/dev/sda', '/dev/nvme0n1']

/**
 * The node's disks as Disk resources' specs (pkg/machinery/resources/block/disk.go, v1.14.1):
 * nodes.json lists device paths or specs; a path gets what a QEMU machine's disk reports (model,
 * serial, transport, and the udev links of internal/app/machined/pkg/controllers/block/symlinks.go:
 * by-id from the model and serial, by-path, by-diskseq).
 */
function disksOf(node) {
  return (node.disks ?? DEFAULT_DISKS).map((d, i) => {
    const given = typeof d === 'string' ? {dev_path: d} : d
    const id = given.dev_path.replace(/^\/dev\//, '')
    const nvme = id.startsWith('nvme')
    const model = nvme ? 'QEMU NVMe Ctrl' : 'QEMU HARDDISK'
    const serial = nvme ? `deadbeef${i}` : `QM0000${i + 1}`
    return {
      id,
      size: 512110190592,
      pretty_size: '512 GB',
      io_size: 512,
      sector_size: 512,
      readonly: false,
      cdrom: false,
      model,
      serial,
      transport: nvme ? 'nvme' : 'sata',
      bus_path: `/pci0000:00/0000:00:0${i + 3}.0/${nvme ? 'nvme' : 'ata1'}`,
      symlinks: [
        `/dev/disk/by-diskseq/${i + 1}`,
        `/dev/disk/by-id/${nvme ? 'nvme' : 'ata'}-${model.replace(/ /g, '_')}_${serial}`,
        `/dev/disk/by-path/pci-0000:00:0${i + 3}.0-${nvme ? 'nvme-1' : 'ata-1'}`,
      ],
      ...given,
    }
  })
}

/**
 * `get disks`: the node's Disk resources (Disks.block.talos.dev, namespace runtime; spec fields
 * of pkg/machinery/resources/block/disk.go, v1.14.1). Readable with --insecure in maintenance
 * mode: the resource is NonSensitive and internal/app/resources/access.go (v1.14.1) lets any
 * role read those.
 */
function getDisks(args) {
  const ip = requireNode(args, 'error getting resources')
  const node = loadNode(ip, 'error getting resources')
  requireConfigured(node, args, 'error getting resources')
  if ((args.one('output') ?? 'yaml') !== 'yaml') fail('the simulator only answers `get disks -o yaml`')
  const docs = disksOf(node).map(({id, ...spec}) =>
    stringify({
      node: ip,
      metadata: {namespace: 'runtime', type: 'Disks.block.talos.dev', id, version: 1, owner: 'block.DisksController', phase: 'running'},
      spec,
    }),
  )
  process.stdout.write(docs.join('---\n'))
}

/**
 * The disk a config installs onto, as Talos v1.14.1 picks it: with an UnattendedInstallConfig,
 * its CEL selector over the Disk resources in ID order, the first match
 * (controllers/runtime/unattended_install.go; none: it waits, "no disk matched the selector");
 * a config that also has machine.install is refused (runtime/unattended_install.go
 * V1Alpha1ConflictValidate, checked by the node's ValidateAtRuntime). Without one,
 * machine.install.disk resolved by filepath.EvalSymlinks, so a /dev/disk/by-* link names its disk
 * (v1alpha1_sequencer_tasks.go Install). Only the selector forms listed in celTerm are
 * evaluated, and machine.install.diskSelector not at all: anything else fails loudly.
 */
function installDiskOf(docs, disks) {
  const unattended = docs.find((d) => d.kind === 'UnattendedInstallConfig')
  const legacy = docs.find(isLegacy)?.machine?.install
  if (unattended && legacy)
    fail(
      'error applying new configuration: rpc error: code = InvalidArgument desc = configuration validation failed: 1 error occurred:\n\t* UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)',
    )
  const ordered = [...disks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  if (unattended) {
    const expr = String(unattended.provisioning?.diskSelector?.match ?? '')
    const terms = expr.split('&&').map(celTerm)
    const chosen = ordered.find((d) => terms.every((t) => t(d)))
    return chosen ? {disk: chosen.dev_path} : {error: 'no disk matched the selector'}
  }
  if (!legacy) return undefined
  if (legacy.diskSelector) fail('the talosctl simulator does not model machine.install.diskSelector')
  const chosen = ordered.find((d) => d.dev_path === legacy.disk || d.symlinks.includes(legacy.disk))
  return chosen ? {disk: chosen.dev_path} : {error: `lstat ${legacy.disk}: no such file or directory`}
}

/** One `&&` term of a disk selector: disk.F == "v", disk.F != "v", "v" in disk.symlinks, glob("p", disk.F). */
function celTerm(text) {
  const t = text.trim()
  let m = /^disk\.(\w+) (==|!=) "([^"]*)"$/.exec(t)
  if (m) return (d) => (String(d[m[1]] ?? '') === m[3]) === (m[2] === '==')
  m = /^"([^"]*)" in disk\.symlinks$/.exec(t)
  if (m) return (d) => d.symlinks.includes(m[1])
  m = /^glob\("([^"]*)", disk\.(\w+)\)$/.exec(t)
  if (m) {
    const re = new RegExp(
      `^${m[1]
        .split('*')
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    )
    return (d) => re.test(String(d[m[2]] ?? ''))
  }
  return fail(`the talosctl simulator cannot evaluate the disk selector term ${JSON.stringify(t)}`)
}

function patchMachineConfig(args) {
  const [, type] = args.positionals
  if (!['machineconfig', 'mc'].includes(type)) fail(`the simulator only patches machineconfig (got ${type})`)
  const ip = requireNode(args, 'error patching')
  const node = loadNode(ip, 'error patching')
  requireConfigured(node, args, 'error patching')
  const mode = args.one('mode') ?? 'auto'
  if (!['no-reboot', 'auto', 'reboot', 'staged', 'try'].includes(mode)) fail(`invalid mode "${mode}"`)
  const patches = (args.flags.patch ?? []).flatMap((p) => parseDocs(readPatchArg(p), 'failed to parse patch'))
  if (patches.length === 0) fail('patch: no patches given (--patch)')
  const patched = patchDocs(parseDocs(node.config, 'machine config'), patches)
  node.config = renderDocs(patched)
  node.configVersion = (node.configVersion ?? 0) + 1
  saveNode(node)
  process.stdout.write(`patched MachineConfigs.config.talos.dev/v1alpha1 at the node ${ip}\nApplied configuration without a reboot\n`)
  return afterConfigChange(node)
}

// ---------- gen / validate: delegated to the real talosctl when given ----------

function delegateToRealTalosctl(argv) {
  const real = process.env.TALOS_SIM_REAL_TALOSCTL
  if (!real) return false
  const result = spawnSync(real, argv, {stdio: 'inherit'})
  process.exit(result.status ?? 1)
}

const fakeB64 = (n = 32) => randomBytes(n).toString('base64')
const fakeCert = () => ({crt: fakeB64(48), key: fakeB64(32)})

/** Minimal stand-in of `gen secrets` (not Talos's format in full: fake certificates). */
function genSecrets(args) {
  const out = args.one('output-file') ?? 'secrets.yaml'
  if (existsSync(out) && !args.bool('force')) fail(`file "${out}" already exists, use --force to overwrite`)
  writeFileSync(out, stringify(fakeSecretsBundle()))
}

function fakeSecretsBundle() {
  return {
    cluster: {id: fakeB64(), secret: fakeB64()},
    secrets: {bootstraptoken: `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`, secretboxencryptionsecret: fakeB64()},
    trustdinfo: {token: `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`},
    certs: {etcd: fakeCert(), k8s: fakeCert(), k8saggregator: fakeCert(), k8sserviceaccount: {key: fakeB64(32)}, os: fakeCert()},
  }
}

/** Minimal stand-in of `gen config`: one v1alpha1 document per type, patches applied the Talos way. */
function genConfig(args) {
  const [, , clusterName, endpoint] = args.positionals
  if (!clusterName || !endpoint) fail('gen config: accepts 2 arg(s): cluster name and endpoint')
  // Without --with-secrets, talosctl generates a new bundle for this config (cmd/talosctl/cmd/gen/config.go).
  const secretsPath = args.one('with-secrets')
  const secrets = secretsPath ? parseDocs(readFileSync(secretsPath, 'utf8'), 'secrets bundle')[0] : fakeSecretsBundle()
  const outDir = args.one('output') ?? args.one('output-dir') ?? '.'
  mkdirSync(outDir, {recursive: true})
  const k8sVersion = (args.one('kubernetes-version') ?? '1.37.0').replace(/^v/, '')
  const talosVersion = args.one('talos-version') ?? simVersion()
  const base = (type) => ({
    version: 'v1alpha1',
    debug: false,
    persist: true,
    machine: {
      type,
      token: secrets.trustdinfo.token,
      ca: {crt: secrets.certs.os.crt, ...(type === 'worker' ? {} : {key: secrets.certs.os.key})},
      certSANs: [],
      kubelet: {image: `ghcr.io/siderolabs/kubelet:v${k8sVersion}`},
      install: {disk: '/dev/sda', image: `ghcr.io/siderolabs/installer:${talosVersion}`},
    },
    cluster: {
      id: secrets.cluster.id,
      secret: secrets.cluster.secret,
      controlPlane: {endpoint},
      clusterName,
      network: {dnsDomain: 'cluster.local', podSubnets: ['10.244.0.0/16'], serviceSubnets: ['10.96.0.0/12']},
      token: secrets.secrets.bootstraptoken,
      ca: {crt: secrets.certs.k8s.crt, ...(type === 'worker' ? {} : {key: secrets.certs.k8s.key})},
    },
  })
  const patchesFor = (names) => names.flatMap((n) => args.flags[n] ?? []).flatMap((p) => parseDocs(readPatchArg(p), 'failed to parse config patch'))
  const files = {
    'controlplane.yaml': patchDocs([base('controlplane')], patchesFor(['config-patch', 'config-patch-control-plane'])),
    'worker.yaml': patchDocs([base('worker')], patchesFor(['config-patch', 'config-patch-worker'])),
  }
  for (const [name, docs] of Object.entries(files)) {
    const path = join(outDir, name)
    if (existsSync(path) && !args.bool('force')) fail(`file "${path}" already exists, use --force to overwrite`)
    writeFileSync(path, renderDocs(docs))
  }
  const talosconfig = {context: clusterName, contexts: {[clusterName]: {endpoints: [], ca: secrets.certs.os.crt, crt: fakeB64(48), key: fakeB64(32)}}}
  writeFileSync(join(outDir, 'talosconfig'), stringify(talosconfig))
}

/** Minimal stand-in of `validate`: structure only, not Talos's validator. */
function validate(args) {
  const path = args.one('config') ?? fail('validate: required flag "config" not set')
  const docs = parseDocs(readFileSync(path, 'utf8'), 'failed to parse config')
  const problems = []
  const legacy = docs.find(isLegacy)
  if (!legacy) problems.push('no v1alpha1 document')
  else {
    if (!['controlplane', 'worker', 'init'].includes(legacy.machine?.type)) problems.push(`machine.type "${legacy.machine?.type}" is invalid`)
    if (!/^https:\/\//.test(legacy.cluster?.controlPlane?.endpoint ?? '')) problems.push('cluster.controlPlane.endpoint must be an https URL')
  }
  for (const m of inlineManifests(readFileSync(path, 'utf8'))) {
    if (!m.name) problems.push('an inline manifest has no name')
    try {
      parseDocs(m.contents, `inline manifest ${m.name}`)
    } catch (e) {
      problems.push(e.message)
    }
  }
  if (problems.length) fail(`${problems.length} error(s) occurred:\n${problems.map((p) => `\t* ${p}`).join('\n')}`)
  process.stdout.write(`${path} is valid for ${args.one('mode') ?? 'metal'} mode\n`)
}

async function main(argv) {
  const args = parseArgs(argv)
  const [cmd, sub] = args.positionals
  if (cmd !== RUNNER_ARG) await bootDueNodes()
  switch (cmd) {
    case RUNNER_ARG:
      return manifestRunner(sub)
    case 'version':
      return version(args)
    case 'gen':
      delegateToRealTalosctl(argv)
      if (sub === 'secrets') return genSecrets(args)
      if (sub === 'config') return genConfig(args)
      return fail(`the simulator does not implement gen ${sub}`)
    case 'validate':
      delegateToRealTalosctl(argv)
      return validate(args)
    case 'machineconfig':
    case 'mc':
      // Offline (no node): the real talosctl when given, as gen and validate are.
      delegateToRealTalosctl(argv)
      return fail('the simulator has no stand-in for `machineconfig patch`: set TALOS_SIM_REAL_TALOSCTL')
    case 'apply-config':
    case 'apply':
      return applyConfig(args)
    case 'bootstrap':
      return bootstrap(args)
    case 'kubeconfig':
      return kubeconfig(args)
    case 'get':
      return getMachineConfig(args)
    case 'patch':
      return patchMachineConfig(args)
    case 'upgrade-k8s':
      return upgradeK8s(args)
    case 'upgrade':
      return upgradeTalos(args)
    case 'reset':
      return resetNode(args)
    case 'shutdown':
      return shutdownNode(args)
    case 'etcd':
      if (sub === 'status') return etcdStatus(args)
      if (sub === 'members') return etcdMembersCmd(args)
      if (sub === 'leave') return etcdLeaveCmd(args)
      if (sub === 'remove-member') return etcdRemoveMemberCmd(args)
      if (sub === 'snapshot') return etcdSnapshotCmd(args)
      return fail(`the simulator does not implement etcd ${sub}`)
    default:
      return fail(`the talosctl simulator does not implement "${argv.join(' ')}"`)
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (error) => {
    if (error instanceof CliError) process.stderr.write(`${error.message}\n`)
    else process.stderr.write(`talosctl simulator: ${error?.stack ?? error}\n${error?.body ? JSON.stringify(error.body) : ''}\n`)
    process.exit(1)
  },
)
