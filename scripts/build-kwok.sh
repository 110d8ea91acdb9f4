#!/usr/bin/env bash
# Builds the real kwok the e2e harness runs for its simulated machines (Nodes with kubelet-like
# status and heartbeats, pods taken through their lifecycle by stages), from the Go module in
# test/envtest (version pinned by its go.mod/go.sum). It shares the control plane's k8s.io
# modules, so a cold build after build-envtest.sh compiles only kwok's own packages. The binary
# is cached outside the repo, keyed by version, and only built when missing; the stage
# configurations kwok ships in its module (kustomize/stage/) are copied beside it.
# Prints the directory on stdout.
#
#   scripts/build-kwok.sh              # build if missing, print the directory
#   ICHOR_KWOK_FORCE=1 scripts/...     # rebuild even when cached
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cached-binary.sh"
mod="$root/test/envtest"

fail() { echo "build-kwok: $*" >&2; exit 1; }

[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"
version="$(gomod_require "$mod/go.mod" sigs.k8s.io/kwok)"
[[ -n "$version" ]] || fail "cannot read the kwok version from $mod/go.mod"

out="${XDG_CACHE_HOME:-$HOME/.cache}/ichor-test/kwok-${version#v}"
have_all() { [[ -x "$out/kwok" && -d "$out/stage/pod" && -d "$out/stage/node" ]]; }

reuse_or_lock have_all "$out" "$out" ICHOR_KWOK_FORCE
command -v go >/dev/null 2>&1 || fail "Go is not installed: need go >= 1.26 on PATH to build kwok $version"

cd "$mod"
export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" CGO_ENABLED=0
echo "build-kwok: building kwok $version into $out" >&2
start=$SECONDS
nice -n 10 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$out/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok \
  || fail "go build of kwok $version failed (see the errors above)"
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)" || fail "cannot find the kwok module's folder"
rm -rf "$out/stage"
cp -r "$src/kustomize/stage" "$out/stage"
chmod -R u+w "$out/stage"
# Rename last, so an interrupted build never leaves a binary that looks complete.
mv -f "$out/kwok.tmp" "$out/kwok"
have_all || fail "kwok or its stages missing in $out after the build"
echo "build-kwok: done in $((SECONDS - start))s" >&2
echo "$out"
