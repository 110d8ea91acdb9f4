#!/usr/bin/env bash
# Builds the real talosctl commands the Talos tests run (`gen`, `machineconfig patch`, `validate`,
# `version --client`), from the Go module in test/talosctl (version pinned by its go.mod/go.sum):
# talosctl's own `gen` and `machineconfig` packages without `cluster create` and the node
# commands (test/talosctl/main.go says why), a fifth less Go to compile in a cold set-up. The binary is cached
# outside the repo, keyed by version, and only built when missing; the Go build cache
# makes a rebuild incremental. Prints the binary's path on stdout.
#
#   scripts/build-talosctl.sh            # build if missing, print the path
#   ICHOR_TALOSCTL_FORCE=1 scripts/...   # rebuild even when cached
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cached-binary.sh"
mod="$root/test/talosctl"

fail() { echo "build-talosctl: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || fail "Go is not installed (need go >= 1.26 on PATH)"
[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"

version="$(gomod_require "$mod/go.mod" github.com/siderolabs/talos)"
[[ -n "$version" ]] || fail "cannot read the talos version from $mod/go.mod"

out="${XDG_CACHE_HOME:-$HOME/.cache}/ichor-test/talosctl-offline-${version}"
bin="$out/talosctl"
have_bin() { [[ -x "$bin" ]]; }

reuse_or_lock have_bin "$bin" "$out" ICHOR_TALOSCTL_FORCE

cd "$mod"
# CGO_ENABLED=0 as Talos builds its release talosctl; it also lets every test binary share
# one compiled standard library and skips the C compiler.
export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" CGO_ENABLED=0
echo "build-talosctl: building talosctl $version into $out (the first build takes many minutes)" >&2
start=$SECONDS
# nice: the first build is long on small machines; keep the rest usable.
nice -n 10 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$bin.tmp" . \
  || fail "go build of talosctl $version failed (see the errors above)"
# Rename last, so an interrupted build never leaves a binary that looks complete.
mv -f "$bin.tmp" "$bin"
"$bin" version --client >/dev/null 2>&1 || fail "the built $bin does not run"
echo "build-talosctl: done in $((SECONDS - start))s" >&2
echo "$bin"
