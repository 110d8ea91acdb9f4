// Pins the Cilium Go module whose CRDs the test harness registers (see
// scripts/fetch-cilium-crds.sh); go.sum holds its checksum, so the download is verified.
module ichor.test/cilium-crds

go 1.26.5

require github.com/cilium/cilium v1.18.0
