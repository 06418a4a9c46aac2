//go:build tools

// Package tools pins the Kueue this module builds (`go build sigs.k8s.io/kueue/cmd/kueue`).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
