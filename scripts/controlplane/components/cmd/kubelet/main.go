// kubelet for the ncclguard test node: the upstream command of the same
// Kubernetes version as the control plane, built from the module proxy.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	// Registered by side effect upstream too (JSON logs, client and version metrics).
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
