# Sourced by the scripts that put a test binary in a cache folder (get-helm.sh and the build-*.sh
# scripts): each one reads its pinned version from a go.mod, returns at once when the binary is
# there, and otherwise takes the folder's lock so concurrent callers fetch or build only once.

# The version go.mod at $1 requires of module $2: `require M vX` on one line, or inside a block.
gomod_require() {
  awk -v m="$2" '$1 == "require" && $2 == m {print $3; exit}
    $1 == m && $2 ~ /^v/ {print $2; exit}' "$1"
}

# Prints $2 and ends the script when the command $1 succeeds (the binary is there), unless the
# variable named $4 asks for a rebuild. Otherwise creates folder $3 and holds its lock until the
# script ends, then checks again: one caller fetches or builds, the others wait and reuse it.
reuse_or_lock() {
  reuse_if_cached "$1" "$2" "$4"
  mkdir -p "$3"
  exec 9>"$3/.lock"
  flock 9
  reuse_if_cached "$1" "$2" "$4"
}

reuse_if_cached() {
  if "$1" && [[ -z "${!3:-}" ]]; then
    echo "$2"
    exit 0
  fi
}
