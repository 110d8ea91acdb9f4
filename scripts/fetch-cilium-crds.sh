#!/usr/bin/env bash
# Makes the Cilium Go modules pinned under test/cilium-crds/v<version>/ (one small module per
# Cilium version, its checksum in that folder's go.sum) available in the Go module cache.
# The test harness's cilium-operator simulator registers, for an operator of version X, the
# CRDs of the module pinned for X (or the nearest older one pinned): the generated YAMLs under
# pkg/k8s/apis/cilium.io/client/crds/{v2,v2alpha1}, the very files that package go:embeds and
# the cilium-operator registers (register.go, GetPregeneratedCRD), and the schema-version
# constant in pkg/k8s/apis/cilium.io/register.go.
#
# Which versions are pinned: those of the Cilium charts in the upstream mirror that the Go module
# proxy serves. Served: v1.18.0, v1.19.6, v1.20.0. Not served: v1.18.12 ("This module version is
# not available"); the simulator uses v1.18.0's CRDs for a 1.18.12 operator and says so.
#
# Why the module's files and not a Go program that imports that package and prints them:
# the package pulls in Cilium's whole Kubernetes client, and compiling it is far too slow for
# a few YAML files. Measured here (2 cores, load 25-40): `go build` of such a program with an
# empty GOCACHE took 28 min 3 s wall (316 s user + 54 s sys CPU), with a warm GOCACHE 61 s
# wall; `go mod download` of the module into an empty GOMODCACHE took 26 s wall (116 MB), and
# 0.1 s once cached (5-7 s per version on a warmer proxy connection).
#
#   scripts/fetch-cilium-crds.sh            # every pinned version: prints "<version> <folder>" lines
#   scripts/fetch-cilium-crds.sh 1.19.6     # that pinned version only: prints its folder
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mods="$root/test/cilium-crds"

fail() { echo "fetch-cilium-crds: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "Go is not installed (need go >= 1.26 on PATH)"

# fetch VERSION: downloads the module pinned in test/cilium-crds/vVERSION, prints its folder.
fetch() {
  local mod="$mods/v$1" json dir
  [[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing (pinned: $(cd "$mods" && echo v*))"
  # -mod=readonly: the download is checked against go.sum, never added to it.
  json="$(cd "$mod" && GOFLAGS=-mod=readonly go mod download -json github.com/cilium/cilium)" \
    || fail "go mod download of github.com/cilium/cilium v$1 failed: $json"
  dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" && -f "$dir/pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml" ]] \
    || fail "the downloaded module v$1 has no pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml: $json"
  echo "$dir"
}

if [[ $# -gt 0 ]]; then
  fetch "${1#v}"
  exit 0
fi
for d in "$mods"/v*/; do
  v="$(basename "$d")"
  echo "$v $(fetch "${v#v}")"
done
