// kube-apiserver for the ncclguard test control plane: the upstream command,
// built from the module proxy instead of a release download.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	// Registered by side effect upstream too; without them the /metrics and
	// --logging-format=json surfaces differ from a release binary.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
