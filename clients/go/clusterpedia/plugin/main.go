// Command plugin is the walwatch storage as a Clusterpedia storage plugin:
// build it with -buildmode=plugin against the Clusterpedia release it is
// loaded into (the same Go toolchain and module versions; see
// clients/go/README.md), put the .so in $STORAGE_PLUGINS and start the
// APIServer with --storage-name=walwatch.
package main

import "github.com/walwatch/walwatch/clients/go/clusterpedia/walwatchstorage"

func init() {
	walwatchstorage.Register()
}

func main() {}
