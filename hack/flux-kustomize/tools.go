//go:build tools

// Package tools pins the Flux kustomize-controller this module builds (`go build github.com/fluxcd/kustomize-controller`).
package tools

import _ "github.com/fluxcd/kustomize-controller"
