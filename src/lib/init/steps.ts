// The steps of `ichor init`, in order (DESIGN.md "The flow of ichor init"). The real run
// gives each a probe and an action; the offline dry run prints this list as the plan.
export const INIT_STEPS = [
  {id: 'validate', title: 'Validate inputs, artifacts and Cilium values'},
  {id: 'talos-secrets', title: 'Generate or reuse the Talos secrets bundle'},
  {id: 'talos-configs', title: 'Render machine configs with the Cilium inline manifest'},
  {id: 'apply-configs', title: 'Apply machine configs to nodes in maintenance mode'},
  {id: 'bootstrap-etcd', title: 'Bootstrap etcd on the first control plane'},
  {id: 'kubeconfig', title: 'Fetch the kubeconfig and wait for the API server'},
  {id: 'lease', title: 'Take the ichor-system Lease'},
  {id: 'state-in-cluster', title: 'Install the IchorInstallation CRD and store the desired state and Talos secrets'},
  {id: 'wait-cilium', title: 'Wait for the Cilium DaemonSet'},
  {id: 'adopt-cilium', title: 'Adopt Cilium into Helm release kube-system/cilium (--take-ownership)'},
  {id: 'talos-handover', title: 'Take Cilium out of Talos: inventory and inline-manifest entry'},
  {id: 'stack-secrets', title: 'Create the generated Secrets once (Kokumi admin, Argo CD redis, repo-creds)'},
  {id: 'kokumi-apply', title: 'Apply Kokumi (first install only) and wait for its registry'},
  {id: 'argocd-apply', title: 'Apply Argo CD (first install only) and wait for server and repo-server'},
  {id: 'publish-bundles', title: 'Publish the kokumi and argocd bundles to the in-cluster registry'},
  {id: 'orders', title: 'Create or move the Kokumi Orders'},
  {id: 'policies', title: 'Apply the CiliumNetworkPolicies last'},
  {id: 'wait-applications', title: 'Wait until both Applications are Synced and Healthy'},
] as const

export type InitStepId = (typeof INIT_STEPS)[number]['id']
