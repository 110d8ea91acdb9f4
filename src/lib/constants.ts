// Names ichor writes into every cluster, defined once. Changing one orphans what earlier
// versions of ichor created, so they are part of the on-cluster contract.

/** The namespace of ichor's own state: the Lease, the Talos bundle, the generated Secrets. */
export const ICHOR_SYSTEM = 'ichor-system'

/** The field manager of every server-side apply and patch ichor sends. */
export const FIELD_MANAGER = 'ichor-bootstrap'

/** `app.kubernetes.io/managed-by` value on objects ichor creates itself. */
export const MANAGED_BY = {'app.kubernetes.io/managed-by': 'ichor'} as const

/** Argo CD's namespace: its release, its repo-creds and AppProject, and every Application Kokumi creates. */
export const ARGOCD_NAMESPACE = 'argocd'

/** The Helm release ichor adopts Cilium into and upgrades. */
export const CILIUM_RELEASE = {name: 'cilium', namespace: 'kube-system'} as const

/** The IchorInstallation singleton holding the desired state (spec) and what was applied (status). */
export const INSTALLATION = {
  group: 'ichor.maesh.dev',
  apiVersion: 'ichor.maesh.dev/v1alpha1',
  kind: 'IchorInstallation',
  plural: 'ichorinstallations',
  name: 'ichor',
} as const

/** The Lease every mutating command holds. */
export const LOCK = {namespace: ICHOR_SYSTEM, name: 'ichor-lock'} as const

/** Secrets in ichor-system holding what must never be regenerated. */
export const STATE_SECRETS = {talos: 'ichor-talos', kokumiAdmin: 'ichor-kokumi-admin', argocdRedis: 'ichor-argocd-redis'} as const
