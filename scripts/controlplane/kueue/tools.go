//go:build tools

// Kueue's manager lives in a main package (sigs.k8s.io/kueue/cmd/kueue) that
// cannot be imported, so this module only pins it; controlplane.sh builds it
// with `go build sigs.k8s.io/kueue/cmd/kueue` from inside this module.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
