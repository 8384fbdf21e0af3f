//go:build tools

// helm's command lives in a main package (helm.sh/helm/v3/cmd/helm) that
// cannot be imported, so this module only pins it; controlplane.sh builds it
// with `go build helm.sh/helm/v3/cmd/helm` from inside this module.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
