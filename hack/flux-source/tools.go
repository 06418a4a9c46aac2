//go:build tools

// Package tools pins the Flux source-controller this module builds (`go build github.com/fluxcd/source-controller`).
package tools

import _ "github.com/fluxcd/source-controller"
