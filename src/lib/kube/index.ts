// The Kubernetes layer: connection, generic objects, server-side apply, waits, the
// cluster lock and the registry tunnel.
export * from './client.js'
export * from './kubeconfig.js'
export * from './credentials.js'
export * from './objects.js'
export * from './apply.js'
export * from './wait.js'
export * from './lease.js'
export * from './portforward.js'
export * from './request-settings.js'
