#!/usr/bin/env bash
# Makes the Cilium Go module pinned by test/cilium-crds/go.mod (checksum in its go.sum)
# available in the Go module cache and prints its folder. The test harness registers the
# CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy CRDs from it: the generated YAMLs
# under pkg/k8s/apis/cilium.io/client/crds/v2, the very files that package go:embeds and the
# cilium-operator registers (register.go, GetPregeneratedCRD).
#
# Why the module's files and not a Go program that imports that package and prints them:
# the package pulls in Cilium's whole Kubernetes client, and compiling it is far too slow for
# two YAML files. Measured here (2 cores, load 25-40): `go build` of such a program with an
# empty GOCACHE took 28 min 3 s wall (316 s user + 54 s sys CPU), with a warm GOCACHE 61 s
# wall; `go mod download` of the module into an empty GOMODCACHE took 26 s wall (116 MB), and
# 0.1 s once cached.
#
#   scripts/fetch-cilium-crds.sh      # download if missing, print the module folder
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/test/cilium-crds"

fail() { echo "fetch-cilium-crds: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "Go is not installed (need go >= 1.26 on PATH)"
[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"
cd "$mod"
# -mod=readonly: the download is checked against go.sum, never added to it.
json="$(GOFLAGS=-mod=readonly go mod download -json github.com/cilium/cilium)" \
  || fail "go mod download of github.com/cilium/cilium failed: $json"
dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" && -f "$dir/pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml" ]] \
  || fail "the downloaded module has no pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml: $json"
echo "$dir"
