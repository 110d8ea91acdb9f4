//go:build tools

// Keeps talosctl's main package in this module's build list for `go mod tidy`.
package tools

import _ "github.com/siderolabs/talos/cmd/talosctl"
