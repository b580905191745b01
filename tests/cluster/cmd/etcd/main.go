// Command etcd is the etcd server of the test control plane: upstream's own
// entry point (go.etcd.io/etcd/server/v3/etcdmain), built at the version that
// go.mod pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
