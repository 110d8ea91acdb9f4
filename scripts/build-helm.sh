#!/usr/bin/env bash
# Builds a real helm from the Go module in test/helm3 or test/helm4 (version pinned by
# its go.mod/go.sum), with the version stamps helm's own Makefile sets. The binary is
# cached outside the repo, keyed by version, and only built when missing; the Go build
# cache makes a rebuild incremental. Prints the binary's path on stdout.
#
#   scripts/build-helm.sh 4            # Helm 4 (the demo's and the tests' default helm)
#   scripts/build-helm.sh 3            # Helm 3 (the e2e helm tests run against both)
#   ICHOR_HELM_FORCE=1 scripts/...     # rebuild even when cached
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
major="${1:-4}"

fail() { echo "build-helm: $*" >&2; exit 1; }

[[ "$major" == 3 || "$major" == 4 ]] || fail "unknown helm major \"$major\": accepted are 3 and 4"
mod="$root/test/helm$major"
[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"

# `require helm.sh/helm/vN vX` on one line, or inside a require block.
version="$(awk -v m="helm.sh/helm/v$major" '$1 == "require" && $2 == m {print $3; exit}
  $1 == m && $2 ~ /^v/ {print $2; exit}' "$mod/go.mod")"
[[ -n "$version" ]] || fail "cannot read the helm version from $mod/go.mod"

out="${XDG_CACHE_HOME:-$HOME/.cache}/ichor-test/helm-${version}"
bin="$out/helm"

if [[ -x "$bin" && -z "${ICHOR_HELM_FORCE:-}" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null 2>&1 || fail "Go is not installed: need go >= 1.26 on PATH to build helm $version"
mkdir -p "$out"
# Several callers may ask at once: one builds, the others wait and then reuse it.
exec 9>"$out/.lock"
flock 9
if [[ -x "$bin" && -z "${ICHOR_HELM_FORCE:-}" ]]; then
  echo "$bin"
  exit 0
fi

cd "$mod"
export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" CGO_ENABLED=0
# What helm's Makefile stamps on a tagged release build: without the version, helm
# reports "v4.3"/"v3.18" and its metadata; Helm 3 also takes the Kubernetes version
# that `helm template` assumes from client-go's (Helm 4 reads it from the build info).
pkg="helm.sh/helm/v$major"
ldflags="-s -w -X $pkg/internal/version.version=$version -X $pkg/internal/version.metadata= -X $pkg/internal/version.gitTreeState=clean"
if [[ "$major" == 3 ]]; then
  client_go="$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v0\./ {print $2; exit}' go.mod)"
  [[ -n "$client_go" ]] || fail "cannot read the k8s.io/client-go version from $mod/go.mod"
  k8s_minor="$(echo "$client_go" | cut -d. -f2)"
  for p in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X $pkg/$p.k8sVersionMajor=1 -X $pkg/$p.k8sVersionMinor=$k8s_minor"
  done
fi

echo "build-helm: building helm $version into $out (the first build takes minutes)" >&2
start=$SECONDS
# nice: the first build is long on small machines; keep the rest usable. -ldflags -w drops
# DWARF from the binary, -dwarf=false from every compiled package too (4% of a cold client-go
# compile's CPU). All test binaries build with the same flags, so they share one standard library.
nice -n 10 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$bin.tmp" "$pkg/cmd/helm" \
  || fail "go build of helm $version failed (see the errors above)"
# Rename last, so an interrupted build never leaves a binary that looks complete.
mv -f "$bin.tmp" "$bin"
got="$("$bin" version --template '{{.Version}}' 2>/dev/null)" || fail "the built $bin does not run"
[[ "$got" == "$version" ]] || fail "the built $bin reports $got, expected $version"
echo "build-helm: done in $((SECONDS - start))s" >&2
echo "$bin"
