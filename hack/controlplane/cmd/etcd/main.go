// Command etcd is upstream's etcd main, pinned to the version kube-apiserver is built against.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
