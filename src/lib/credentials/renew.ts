// `ichor credentials renew`: fresh client certificates where the old ones were. The talosconfig
// this machine uses (--talosconfig, else init's state folder) gets a new admin certificate signed
// by the cluster's OS CA from the secrets bundle (what `talosctl gen config --with-secrets` issues,
// valid for a year), the kubeconfig in use gets the credentials of a fresh admin kubeconfig from a
// control plane (`talosctl kubeconfig`), and the talosconfig in the cluster's sealed bundle gets
// the same new certificate, so `ichor talosconfig` on another machine hands out a valid one. A
// credential is due when its certificate ends within RENEW_WITHIN_DAYS (or --force); each file is
// copied to FILE.bak (0600) before it is replaced, and only the entry of the cluster changes.
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {parse as parseYaml, stringify} from 'yaml'
import {ICHOR_SYSTEM, STATE_SECRETS} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {writePrivateFileAtomic} from '../fs/private-files.js'
import type {Kubeconfig} from '../kube/kubeconfig.js'
import type {Session} from '../session/session.js'
import {readTalosBundleSecret} from '../state/installation.js'
import {bundleOfSecret, sealedBundleSecret, type SecretWithData, type TalosBundle} from '../state/sealed-bundle.js'
import type {TalosAccess} from '../talos/access.js'
import {certificateOf, RENEW_WITHIN_DAYS} from '../talos/credential-expiry.js'
import {genConfig, kubeconfig as fetchKubeconfig, TalosctlError} from '../talos/talosctl.js'
import {once} from '../tasks/memo.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import type {KubeconfigFile, TalosconfigFile} from './merge.js'

const DAY_MS = 86_400_000

export interface RenewInput {
  session: Session
  talos: TalosAccess
  /** A private (0700) folder for the generated files, removed by the plan. */
  tempDir: string
  /** --force: renew what is not due yet too. */
  force: boolean
}

/** Renewed when its certificate ends within RENEW_WITHIN_DAYS, or with --force; a credential without one is left alone. */
export function renewal(base64Pem: unknown, force: boolean, now = Date.now()): {renew: boolean; detail: string} {
  const cert = typeof base64Pem === 'string' ? certificateOf(base64Pem) : undefined
  if (!cert) return {renew: false, detail: 'no client certificate to renew'}
  const end = new Date(cert.validTo)
  const date = end.toISOString().slice(0, 10)
  if (end.getTime() <= now) return {renew: true, detail: `certificate expired on ${date}`}
  const soon = end.getTime() - now <= RENEW_WITHIN_DAYS * DAY_MS
  return {renew: soon || force, detail: `certificate ${soon ? 'ends' : 'valid until'} ${date}${!soon && force ? ' (--force)' : ''}`}
}

/** The probe of a renewal step; `renewed`: this run replaced it already (--force would ask again otherwise). */
const probeOf = (r: {renew: boolean; detail: string}, renewed: boolean) => (r.renew && !renewed ? missing(r.detail) : holds(r.detail))

/** The file copied to FILE.bak, 0600, then replaced atomically (0600). */
function replaceWithBackup(file: string, content: string): void {
  writePrivateFileAtomic(`${file}.bak`, readFileSync(file))
  writePrivateFileAtomic(file, content)
}

const readYaml = <T>(file: string) => parseYaml(readFileSync(file, 'utf8')) as T

/** One fresh admin certificate and key per run, signed by the cluster's OS CA (talosctl gen config --with-secrets). */
export function freshTalosCertificate(p: RenewInput): () => Promise<{crt: string; key: string}> {
  return once(async () => {
    const cr = await p.talos.installation()
    const t = cr.spec.talos
    const out = await genConfig({
      clusterName: t.clusterName,
      endpoint: t.endpoint,
      secretsPath: await p.talos.secretsFile(),
      talosVersion: t.talosVersion,
      kubernetesVersion: t.kubernetesVersion,
      outDir: join(p.tempDir, 'generated'),
    })
    const doc = readYaml<TalosconfigFile>(out.talosconfig)
    const context = doc.context ? doc.contexts?.[doc.context] : undefined
    if (typeof context?.crt !== 'string' || typeof context.key !== 'string')
      throw new IchorError('talosctl gen config wrote a talosconfig without a client certificate')
    return {crt: context.crt, key: context.key}
  })
}

/** The talosconfig with its current context's certificate and key replaced. */
function withCertificate(doc: TalosconfigFile, cert: {crt: string; key: string}, what: string): TalosconfigFile {
  const name = doc.context
  const context = name ? doc.contexts?.[name] : undefined
  if (!name || !context) throw new IchorError(`${what} has no current context`)
  return {...doc, contexts: {...doc.contexts, [name]: {...context, crt: cert.crt, key: cert.key}}}
}

const currentTalosCert = (doc: TalosconfigFile) => (doc.context ? doc.contexts?.[doc.context]?.crt : undefined)
const userOf = (doc: KubeconfigFile, userName: string) => doc.users?.find((u) => u.name === userName)?.user as Record<string, unknown> | undefined

/** Whether the talosconfig file's current certificate is renewed, and why (the step's probe and the plan's preview). */
export const talosconfigRenewal = (file: string, force: boolean) => renewal(currentTalosCert(readYaml<TalosconfigFile>(file)), force)

/** Whether the kubeconfig file's user certificate is renewed, and why. */
export const kubeconfigRenewal = (file: string, userName: string, force: boolean) =>
  renewal(userOf(readYaml<KubeconfigFile>(file), userName)?.['client-certificate-data'], force)

export function renewTalosconfigTask(p: RenewInput, file: string, fresh: () => Promise<{crt: string; key: string}>): Task {
  let renewed = false
  return {
    id: 'renew-talosconfig',
    title: `Renew the talosconfig's client certificate (${file}; the old file kept as ${file}.bak)`,
    async probe() {
      return probeOf(talosconfigRenewal(file, p.force), renewed)
    },
    async run() {
      const doc = readYaml<TalosconfigFile>(file)
      replaceWithBackup(file, stringify(withCertificate(doc, await fresh(), file)))
      renewed = true
    },
  }
}

/** The kubeconfig file (of those KUBECONFIG names) that defines the context's user. */
export function kubeconfigFileOfUser(config: Kubeconfig): string | undefined {
  return config.files.find((f) => existsSync(f) && readYaml<KubeconfigFile>(f)?.users?.some((u) => u.name === config.userName))
}

export function renewKubeconfigTask(p: RenewInput, userName: string, file: string): Task {
  let renewed = false
  return {
    id: 'renew-kubeconfig',
    title: `Renew the kubeconfig's admin credentials (user "${userName}" in ${file}; the old file kept as ${file}.bak)`,
    async probe() {
      return probeOf(kubeconfigRenewal(file, userName, p.force), renewed)
    },
    async run(progress) {
      const cr = await p.talos.installation()
      const talosconfig = await p.talos.talosconfig()
      const errors: string[] = []
      for (const node of cr.spec.talos.controlPlanes) {
        try {
          const fetched = readYaml<KubeconfigFile>(await fetchKubeconfig({node, talosconfig, outPath: join(p.tempDir, `kubeconfig-${node}`)}))
          const current = fetched.contexts?.find((c) => c.name === fetched['current-context'])?.context as {user?: string} | undefined
          const credentials = fetched.users?.find((u) => u.name === current?.user)?.user
          if (!credentials) throw new IchorError(`the kubeconfig control plane ${node} handed out has no user`)
          const doc = readYaml<KubeconfigFile>(file)
          const users = (doc.users ?? []).map((u) => (u.name === userName ? {...u, user: credentials} : u))
          replaceWithBackup(file, stringify({...doc, users}))
          renewed = true
          progress(`fresh admin credentials from control plane ${node}`)
          return
        } catch (error) {
          if (!(error instanceof TalosctlError)) throw error
          errors.push(`${node}: ${error.talosctlMessage}`)
        }
      }
      throw new IchorError(`no control plane handed out a kubeconfig: ${errors.join('; ')}`, {hint: 'check the nodes with ichor talos status'})
    },
  }
}

/** The talosconfig in the cluster's sealed bundle: the same fresh certificate, sealed again with the same key. */
export function renewSealedTalosconfigTask(p: RenewInput, fresh: () => Promise<{crt: string; key: string}>): Task {
  // Opened once per stored version: a passphrase key costs a scrypt run (seconds) per open, and the
  // probe, the action and the re-probe each need it.
  let cached: {resourceVersion?: string; bundle?: TalosBundle} | undefined
  const opened = async (): Promise<{stored?: SecretWithData; bundle?: TalosBundle}> => {
    const stored = await readTalosBundleSecret(await p.session.kube())
    if (!stored) return {}
    let entry = cached
    if (!entry || entry.resourceVersion !== stored.metadata.resourceVersion) {
      const bundle = (
        await bundleOfSecret(
          stored,
          () => p.talos.stateKey(),
          () => undefined,
        )
      )?.bundle
      entry = cached = {resourceVersion: stored.metadata.resourceVersion, bundle}
    }
    return {stored, bundle: entry.bundle}
  }
  let renewed = false
  return {
    id: 'renew-sealed-talosconfig',
    title: `Renew the certificate of the talosconfig in the cluster's sealed bundle (${ICHOR_SYSTEM}/${STATE_SECRETS.talos})`,
    async probe() {
      const {bundle} = await opened()
      if (!bundle) return holds('the cluster keeps no Talos bundle')
      return probeOf(renewal(currentTalosCert(parseYaml(bundle.talosconfig.toString('utf8')) as TalosconfigFile), p.force), renewed)
    },
    async run() {
      const kube = await p.session.kube()
      const {stored, bundle} = await opened()
      if (!stored || !bundle) throw new IchorError(`${ICHOR_SYSTEM}/${STATE_SECRETS.talos} is gone`)
      const doc = withCertificate(parseYaml(bundle.talosconfig.toString('utf8')) as TalosconfigFile, await fresh(), 'the sealed talosconfig')
      const sealed = await sealedBundleSecret({...bundle, talosconfig: Buffer.from(stringify(doc))}, await p.talos.stateKey())
      // resourceVersion-guarded: a concurrent writer makes this fail rather than be overwritten.
      await kube.request('PUT', `/api/v1/namespaces/${ICHOR_SYSTEM}/secrets/${STATE_SECRETS.talos}`, {
        body: {...sealed, metadata: {...sealed.metadata, resourceVersion: stored.metadata.resourceVersion}},
      })
      renewed = true
    },
  }
}
