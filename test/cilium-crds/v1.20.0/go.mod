// Pins the Cilium Go module v1.20.0, whose CRDs the test harness's operator simulator registers
// for a cilium-operator of that version (see scripts/fetch-cilium-crds.sh); go.sum holds its
// checksum, so the download is verified.
module ichor.test/cilium-crds/v1.20.0

go 1.26.5

require github.com/cilium/cilium v1.20.0
