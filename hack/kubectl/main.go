// Command kubectl is kubectl (k8s.io/kubectl v0.37.2) built from the module
// proxy by hack/build-tools.sh, for make bench-engine's side-by-side
// kubectl apply --server-side. It is never imported.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
