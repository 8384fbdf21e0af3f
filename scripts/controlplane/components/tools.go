//go:build tools

// The components whose commands live in main packages that cannot be imported (helm, Kueue's
// manager, Kubeflow Trainer's controller-manager): this file only pins them in the module, and
// controlplane.sh builds them with `go build helm.sh/helm/v3/cmd/helm ...` from inside it. The
// other commands are the small main packages under cmd/.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
