// The environment every helm process gets. helm reads its Kubernetes target from
// HELM_KUBE* variables (context, API server, token, CA, TLS verification, impersonation),
// the namespace from HELM_NAMESPACE and the release storage from HELM_DRIVER, each
// overriding or completing what the kubeconfig says. ichor's own client honours none of
// them, so an operator's shell set up for another cluster would send helm (adopting with
// --take-ownership --force-conflicts) somewhere else than ichor's checks went. They are
// stripped rather than refused: they are commonly left set for the operator's own helm
// use, and ichor's target is fully given by its --kubeconfig and --kube-context, which
// every helm call carries.
const HELM_TARGET_VARIABLES = /^(HELM_KUBE\w*|HELM_NAMESPACE|HELM_DRIVER|HELM_DRIVER_SQL_CONNECTION_STRING|KUBECONFIG)$/

export function helmEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(base).filter(([name]) => !HELM_TARGET_VARIABLES.test(name)))
}
