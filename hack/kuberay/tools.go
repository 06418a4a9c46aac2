//go:build tools

// Package tools pins the operator this module builds (`go build github.com/ray-project/kuberay/ray-operator`).
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
