// Argo CD's health assessment of live objects, as argoproj/argo-cd v3.4.4 does it with the
// gitops-engine it vendors (gitops-engine/pkg/health/*.go in the argo-cd repository) and its
// built-in Lua health checks (resource_customizations/). Only what controllers write is read:
// metadata.generation, status fields and conditions.
import type {KubeObject} from '../../src/lib/kube/objects.js'

export type HealthCode = 'Healthy' | 'Suspended' | 'Progressing' | 'Missing' | 'Degraded' | 'Unknown'
export interface Health {
  status: HealthCode
  message?: string
}

/** health.go healthOrder: most healthy to least healthy. */
const HEALTH_ORDER: readonly HealthCode[] = ['Healthy', 'Suspended', 'Progressing', 'Missing', 'Degraded', 'Unknown']

/** health.go IsWorse. */
export function isWorse(current: HealthCode, next: HealthCode): boolean {
  return HEALTH_ORDER.indexOf(next) > HEALTH_ORDER.indexOf(current)
}

type Live = KubeObject & {spec?: any; status?: any}

/**
 * health.go GetResourceHealth: Progressing while the object is being deleted, else the kind's
 * check; undefined for kinds without one (they do not count in the Application's health).
 */
export function resourceHealth(obj: Live): Health | undefined {
  if (obj.metadata.deletionTimestamp) return {status: 'Progressing', message: 'Pending deletion'}
  const group = obj.apiVersion.includes('/') ? obj.apiVersion.split('/')[0] : ''
  switch (`${group}/${obj.kind}`) {
    case 'apps/Deployment':
      return deploymentHealth(obj)
    case 'apps/StatefulSet':
      return statefulSetHealth(obj)
    case 'apps/ReplicaSet':
      return replicaSetHealth(obj)
    case 'apps/DaemonSet':
      return daemonSetHealth(obj)
    case '/Service':
      return serviceHealth(obj)
    case '/PersistentVolumeClaim':
      return pvcHealth(obj)
    case '/Pod':
      return podHealth(obj)
    case 'apiextensions.k8s.io/CustomResourceDefinition':
      return crdHealth(obj)
    default:
      return undefined
  }
}

const generation = (o: Live): number => o.metadata.generation ?? 0

/** health_deployment.go getAppsv1DeploymentHealth. */
function deploymentHealth(d: Live): Health {
  if (d.spec?.paused) return {status: 'Suspended', message: 'Deployment is paused'}
  const s = d.status ?? {}
  if (generation(d) > (s.observedGeneration ?? 0)) {
    return {status: 'Progressing', message: 'Waiting for rollout to finish: observed deployment generation less than desired generation'}
  }
  const progressing = (s.conditions as any[] | undefined)?.find((c) => c.type === 'Progressing')
  const updated = s.updatedReplicas ?? 0
  const replicas = d.spec?.replicas as number | undefined
  if (progressing?.reason === 'ProgressDeadlineExceeded') return {status: 'Degraded', message: `Deployment "${d.metadata.name}" exceeded its progress deadline`}
  if (replicas !== undefined && updated < replicas)
    return {status: 'Progressing', message: `Waiting for rollout to finish: ${updated} out of ${replicas} new replicas have been updated...`}
  if ((s.replicas ?? 0) > updated)
    return {status: 'Progressing', message: `Waiting for rollout to finish: ${(s.replicas ?? 0) - updated} old replicas are pending termination...`}
  if ((s.availableReplicas ?? 0) < updated)
    return {status: 'Progressing', message: `Waiting for rollout to finish: ${s.availableReplicas ?? 0} of ${updated} updated replicas are available...`}
  return {status: 'Healthy'}
}

/** health_statefulset.go getAppsv1StatefulSetHealth. */
function statefulSetHealth(sts: Live): Health {
  const s = sts.status ?? {}
  if (!s.observedGeneration || generation(sts) > s.observedGeneration)
    return {status: 'Progressing', message: 'Waiting for statefulset spec update to be observed...'}
  const replicas = sts.spec?.replicas as number | undefined
  if (replicas !== undefined && (s.readyReplicas ?? 0) < replicas)
    return {status: 'Progressing', message: `Waiting for ${replicas - (s.readyReplicas ?? 0)} pods to be ready...`}
  const strategy = sts.spec?.updateStrategy ?? {}
  if (strategy.type === 'RollingUpdate' && strategy.rollingUpdate) {
    const partition = strategy.rollingUpdate.partition as number | undefined
    if (replicas !== undefined && partition !== undefined && (s.updatedReplicas ?? 0) < replicas - partition) {
      return {
        status: 'Progressing',
        message: `Waiting for partitioned roll out to finish: ${s.updatedReplicas ?? 0} out of ${replicas - partition} new pods have been updated...`,
      }
    }
    return {status: 'Healthy', message: `partitioned roll out complete: ${s.updatedReplicas ?? 0} new pods have been updated...`}
  }
  if (strategy.type === 'OnDelete') return {status: 'Healthy', message: `statefulset has ${s.readyReplicas ?? 0} ready pods`}
  if (s.updateRevision !== s.currentRevision) {
    return {
      status: 'Progressing',
      message: `waiting for statefulset rolling update to complete ${s.updatedReplicas ?? 0} pods at revision ${s.updateRevision}...`,
    }
  }
  return {status: 'Healthy', message: `statefulset rolling update complete ${s.currentReplicas ?? 0} pods at revision ${s.currentRevision}...`}
}

/** health_replicaset.go getAppsv1ReplicaSetHealth. */
function replicaSetHealth(rs: Live): Health {
  const s = rs.status ?? {}
  if (generation(rs) > (s.observedGeneration ?? 0))
    return {status: 'Progressing', message: 'Waiting for rollout to finish: observed replica set generation less than desired generation'}
  const failure = (s.conditions as any[] | undefined)?.find((c) => c.type === 'ReplicaFailure')
  if (failure?.status === 'True') return {status: 'Degraded', message: failure.message}
  const replicas = rs.spec?.replicas as number | undefined
  if (replicas !== undefined && (s.availableReplicas ?? 0) < replicas) {
    return {status: 'Progressing', message: `Waiting for rollout to finish: ${s.availableReplicas ?? 0} out of ${replicas} new replicas are available...`}
  }
  return {status: 'Healthy'}
}

/** health_daemonset.go getAppsv1DaemonSetHealth. */
function daemonSetHealth(ds: Live): Health {
  const s = ds.status ?? {}
  if (generation(ds) > (s.observedGeneration ?? 0))
    return {status: 'Progressing', message: 'Waiting for rollout to finish: observed daemon set generation less than desired generation'}
  const desired = s.desiredNumberScheduled ?? 0
  const updated = s.updatedNumberScheduled ?? 0
  if (ds.spec?.updateStrategy?.type === 'OnDelete') return {status: 'Healthy', message: `daemon set ${updated} out of ${desired} new pods have been updated`}
  if (updated < desired)
    return {
      status: 'Progressing',
      message: `Waiting for daemon set "${ds.metadata.name}" rollout to finish: ${updated} out of ${desired} new pods have been updated...`,
    }
  if ((s.numberAvailable ?? 0) < desired) {
    return {
      status: 'Progressing',
      message: `Waiting for daemon set "${ds.metadata.name}" rollout to finish: ${s.numberAvailable ?? 0} of ${desired} updated pods are available...`,
    }
  }
  return {status: 'Healthy'}
}

/** health_service.go: only a LoadBalancer waits for an ingress address. */
function serviceHealth(svc: Live): Health {
  if (svc.spec?.type === 'LoadBalancer' && !(svc.status?.loadBalancer?.ingress?.length > 0)) return {status: 'Progressing'}
  return {status: 'Healthy'}
}

/** health_pvc.go. */
function pvcHealth(pvc: Live): Health {
  switch (pvc.status?.phase) {
    case 'Lost':
      return {status: 'Degraded'}
    case 'Pending':
      return {status: 'Progressing'}
    case 'Bound':
      return {status: 'Healthy'}
    default:
      return {status: 'Unknown'}
  }
}

/** health_pod.go getCorev1PodHealth. */
function podHealth(pod: Live): Health {
  const s = pod.status ?? {}
  const restartPolicy = pod.spec?.restartPolicy ?? 'Always'
  const containers = (s.containerStatuses as any[] | undefined) ?? []
  if (restartPolicy === 'Always') {
    const failing = containers.filter((c) => {
      const reason = (c.state?.waiting?.reason as string | undefined) ?? undefined
      return reason !== undefined && (reason.startsWith('Err') || reason.endsWith('Error') || reason.endsWith('BackOff'))
    })
    if (failing.length > 0) return {status: 'Degraded', message: failing.map((c) => c.state.waiting.message ?? '').join(', ')}
  }
  switch (s.phase) {
    case 'Pending':
      return {status: 'Progressing', message: s.message}
    case 'Succeeded':
      return {status: 'Healthy', message: s.message}
    case 'Failed': {
      if (s.message) return {status: 'Degraded', message: s.message}
      for (const c of [...((s.initContainerStatuses as any[] | undefined) ?? []), ...containers]) {
        const t = c.state?.terminated
        const msg =
          t?.message || (t?.reason === 'OOMKilled' ? t.reason : t && t.exitCode !== 0 ? `container "${c.name}" failed with exit code ${t.exitCode}` : '')
        if (msg) return {status: 'Degraded', message: msg}
      }
      return {status: 'Degraded', message: ''}
    }
    case 'Running': {
      if (restartPolicy !== 'Always') return {status: 'Progressing', message: s.message}
      const ready = (s.conditions as any[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True')
      if (ready) return {status: 'Healthy', message: s.message}
      if (containers.some((c) => c.lastState?.terminated)) return {status: 'Degraded', message: s.message}
      return {status: 'Progressing', message: s.message}
    }
  }
  return {status: 'Unknown', message: s.message}
}

/** resource_customizations/apiextensions.k8s.io/CustomResourceDefinition/health.lua (built in). */
function crdHealth(crd: Live): Health {
  const conditions = crd.status?.conditions as any[] | undefined
  if (!conditions || conditions.length === 0) return {status: 'Progressing', message: 'Status conditions not found'}
  let established = false
  for (const c of conditions) {
    if (c.type === 'Terminating' && c.status === 'True') return {status: 'Progressing', message: `CRD is terminating: ${c.message}`}
    if (c.type === 'NamesAccepted' && c.status === 'False') return {status: 'Degraded', message: `CRD names have not been accepted: ${c.message}`}
    if (c.type === 'NonStructuralSchema' && c.status === 'True') return {status: 'Degraded', message: `Schema violations found: ${c.message}`}
    if (c.type === 'Established' && c.status === 'True') established = true
  }
  return established ? {status: 'Healthy', message: 'CRD is healthy'} : {status: 'Degraded', message: 'CRD is not established'}
}
