// CoreDNS for the test node's cluster DNS: CoreDNS's own entry point with only
// the plugins the node's Corefile uses compiled in. There is no forward plugin
// in this binary, so no Corefile can make it send a query off the machine.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
