//go:build tools

// The JobSet controller's command is the module's root package (main), which cannot be
// imported, so this module only pins it; controlplane.sh builds it with
// `go build sigs.k8s.io/jobset` from inside this module.
package tools

import _ "sigs.k8s.io/jobset"
