//go:build tools

// Package envtest pins the main packages scripts/build-envtest.sh and scripts/build-kwok.sh
// build, so that `go mod tidy` keeps their dependencies in go.sum. kwok lives in this module
// too: it then builds on the same k8s.io packages as the control plane, compiled once.
package envtest

import (
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
