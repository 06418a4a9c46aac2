//go:build tools

// Package tools pins the Argo CD binary this module builds (`go build github.com/argoproj/argo-cd/v3/cmd`).
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
