//go:build tools

// Package envtest pins the main packages scripts/build-envtest.sh builds, so that
// `go mod tidy` keeps their dependencies in go.sum.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
