//go:build tools

// The Kubeflow training operator's command lives in a main package that cannot
// be imported, so this module only pins it; controlplane.sh builds it with
// `go build github.com/kubeflow/training-operator/cmd/training-operator.v1`
// from inside this module.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
