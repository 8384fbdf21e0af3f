// etcd for the ncclguard test control plane: etcd's own entry point, so flags
// and behaviour are those of the released etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
