//go:build tools

// Keeps kwok's main package in this module's build list for `go mod tidy`
// (scripts/build-kwok.sh builds it; the harness runs it for the simulated machines).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
