//go:build tools

// Keeps kine in this module's build list, so that
// `go build github.com/k3s-io/kine` builds the server from here, at the
// version go.mod requires.
package main

import _ "github.com/k3s-io/kine/pkg/app"
