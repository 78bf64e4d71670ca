// The walwatch storage as a Clusterpedia storage plugin: this module's
// root is the plugin's main package, as Clusterpedia's hack/builder.sh
// builds a plugin (`builder.sh plugins walwatch-storage.so` run here, with
// CLUSTERPEDIA_REPO naming the Clusterpedia release it is loaded into: the
// same Go toolchain and package versions). Put the .so in the directory
// $STORAGE_PLUGINS names and start the APIServer with
// --storage-name=walwatch; see clients/go/README.md.
package main

import "github.com/walwatch/walwatch/clients/go/clusterpedia/walwatchstorage"

func init() {
	walwatchstorage.Register()
}

func main() {}
