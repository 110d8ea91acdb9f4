#!/usr/bin/env bash
# Builds the real kube-apiserver, kube-controller-manager, kube-scheduler, etcd and etcdutl (the
# snapshot tool Talos restores etcd with) the e2e harness runs, from the Go module in
# test/envtest (versions pinned by its go.mod/go.sum). The binaries are cached outside
# the repo, keyed by version, and only built when missing; the Go build cache makes a
# rebuild after a version bump incremental. Prints the binary directory on stdout.
#
#   scripts/build-envtest.sh            # build if missing, print the directory
#   ICHOR_ENVTEST_FORCE=1 scripts/...   # rebuild even when cached
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cached-binary.sh"
mod="$root/test/envtest"

fail() { echo "build-envtest: $*" >&2; exit 1; }

[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"

# The versions come from go.mod, so the cache key follows the pinned modules.
k8s_version="$(gomod_require "$mod/go.mod" k8s.io/kubernetes)"
etcd_version="$(gomod_require "$mod/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n "$k8s_version" && -n "$etcd_version" ]] || fail "cannot read the kubernetes/etcd versions from $mod/go.mod"

out="${XDG_CACHE_HOME:-$HOME/.cache}/ichor-test/envtest-${k8s_version#v}-${etcd_version#v}"

bins=(kube-apiserver kube-controller-manager kube-scheduler etcd etcdutl)
have_all() { local b; for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || return 1; done; }

reuse_or_lock have_all "$out" "$out" ICHOR_ENVTEST_FORCE

command -v go >/dev/null 2>&1 || fail "Go is not installed: need go >= 1.26 on PATH to build $out"
cd "$mod"
# CGO_ENABLED=0 as Kubernetes and etcd build their release binaries; it also lets every test
# binary share one compiled standard library and skips the C compiler.
export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" CGO_ENABLED=0
# nice: the first build takes many minutes on small machines; keep the rest usable.
gobuild() { nice -n 10 go build -trimpath -gcflags=all=-dwarf=false "$@"; }

# Without these the apiserver reports v0.0.0-master and charts' kubeVersion checks fail.
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"

echo "build-envtest: building ${bins[*]} (Kubernetes $k8s_version, etcd $etcd_version) into $out (a cold build takes many minutes)" >&2
start=$SECONDS
# Each binary is built only when missing (a cache from before the controllers keeps its apiserver),
# and renamed last, so an interrupted build never leaves a binary that looks complete.
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  [[ -x "$out/$b" && -z "${ICHOR_ENVTEST_FORCE:-}" ]] && continue
  gobuild -ldflags "$ldflags" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b" \
    || fail "go build of $b $k8s_version failed (see the errors above)"
  mv -f "$out/$b.tmp" "$out/$b"
done
if [[ ! -x "$out/etcd" || -n "${ICHOR_ENVTEST_FORCE:-}" ]]; then
  gobuild -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 \
    || fail "go build of etcd $etcd_version failed (see the errors above)"
  mv -f "$out/etcd.tmp" "$out/etcd"
fi
if [[ ! -x "$out/etcdutl" || -n "${ICHOR_ENVTEST_FORCE:-}" ]]; then
  gobuild -ldflags "-s -w" -o "$out/etcdutl.tmp" go.etcd.io/etcd/etcdutl/v3 \
    || fail "go build of etcdutl $etcd_version failed (see the errors above)"
  mv -f "$out/etcdutl.tmp" "$out/etcdutl"
fi
have_all || fail "binaries missing in $out after the build"
echo "build-envtest: done in $((SECONDS - start))s" >&2
echo "$out"
