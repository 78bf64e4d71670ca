// kinebench: kine_bench.sh's writer and watchers for kine, which serves
// etcd's gRPC API only (no JSON gateway, so bench_writer --etcd and
// fanout_client --etcd cannot reach it), through etcd's Go client as k3s's
// kube-apiserver does.
//
//	kinebench write --endpoint HOST:PORT [--setup] [--mode one|spread]
//	    [--objects N] [--object-bytes B] [--rate R] [--duration S | --count N]
//	    [--writers W] [--out FILE]
//	kinebench watch --endpoint HOST:PORT (--prefix P | --prefixes-file F)
//	    --watchers N [--ready-file F] [--done-file F] [--check-seq]
//	    [--duration S] [--quiet-ms MS] [--drain-timeout S]
//
// write: bench_writer's objects (the same JSON, stamp
// "bench.walwatch.io/stamp":"W:SEQ:NS", keys /registry/GROUP/RESOURCE/
// CLUSTER/NS/NAME), its modes, rate schedule and --out file (write.go),
// written as kube-apiserver writes to etcd: --setup creates each key (a Txn
// "mod_revision == 0 -> put"), a run updates it (GuaranteedUpdate's Txn
// "mod_revision == R -> put, else get"), R being the revision the writer
// last saw for the key, as the apiserver's watch cache has it. kine
// recognises exactly these Txn shapes (pkg/server/create.go, update.go).
//
// watch: N watchers, one clientv3.Client (TCP connection, gRPC stream) each;
// watcher i watches the keys under line i % lines of --prefixes-file (or
// --prefix). It prints fanout_client's key=value report (watch.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kinebench write|watch [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "write":
		runWrite(os.Args[2:])
	case "watch":
		runWatch(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: kinebench write|watch [flags]")
		os.Exit(2)
	}
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kinebench: "+format+"\n", args...)
	os.Exit(1)
}
