//go:build tools

// Keeps helm's main package in this module's build list for `go mod tidy`.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
