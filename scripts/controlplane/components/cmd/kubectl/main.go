// kubectl for the ncclguard test control plane, same version as the API server.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// -v must reach klog before the command tree parses flags.
	_, _ = logs.GlogSetter(kubectl.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
