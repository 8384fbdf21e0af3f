//go:build tools

// kwok's command (cmd/kwok) is a main package, which cannot be imported, so this module only
// pins it; controlplane.sh builds it with `go build sigs.k8s.io/kwok/cmd/kwok` from inside this
// module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
