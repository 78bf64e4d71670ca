package main

// The writer: bench_writer.cc's workload and report, through etcd's Txn.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type writeOptions struct {
	endpoint, mode, out, revs string
	setup                     bool
	objects, objectBytes      int
	writers                   int
	rate, duration            float64
	count                     uint64
}

// target: one object (bench_writer's Target).
type target struct {
	group, resource, kind, apiVersion, ns, name, uid, shard, cluster string
}

func (t *target) key() string {
	g := t.group
	if g == "" {
		g = "core"
	}
	return "/registry/" + g + "/" + t.resource + "/" + t.cluster + "/" + t.ns + "/" + t.name
}

// targets: bench_writer's MakeWorkload for modes one and spread (the order
// is the targets' own).
func targets(o *writeOptions) []target {
	var ts []target
	switch o.mode {
	case "one":
		for i := 0; i < o.objects; i++ {
			ts = append(ts, target{"apps", "deployments", "Deployment", "apps/v1", "bench",
				fmt.Sprintf("bench-%05d", i), "", "s" + strconv.Itoa(i%4), "c1"})
		}
	case "spread":
		for i := 0; i < o.objects; i++ {
			for ns := 0; ns < 10; ns++ {
				for r := 0; r < 100; r++ {
					ts = append(ts, target{"bench.walwatch.io", fmt.Sprintf("widgets%02d", r), "Widget",
						"bench.walwatch.io/v1", "ns-" + strconv.Itoa(ns), fmt.Sprintf("widget-%05d", i), "",
						"s" + strconv.Itoa(i%4), "c1"})
				}
			}
		}
	}
	rng := rand.New(rand.NewSource(42))
	for i := range ts {
		a, b := rng.Uint64(), rng.Uint64()
		ts[i].uid = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, b>>52, b&0xffffffffffff)
	}
	return ts
}

// objectJSON: bench_writer's ObjectJson: the same fields in the same order
// and the same size (the padding and uids come from another generator).
func objectJSON(t *target, stamp string, generation uint64, padding string) string {
	g := strconv.FormatUint(generation, 10)
	return `{"apiVersion":"` + t.apiVersion + `","kind":"` + t.kind +
		`","metadata":{"name":"` + t.name + `","namespace":"` + t.ns +
		`","uid":"` + t.uid + `","resourceVersion":"` + g +
		`","generation":` + g +
		`,"creationTimestamp":"2026-12-02T13:21:36Z","labels":{"app":"bench","shard":"` + t.shard +
		`"},"annotations":{"shadow.clusterpedia.io/cluster-name":"` + t.cluster +
		`","bench.walwatch.io/stamp":"` + stamp +
		`"}},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"bench"}},"template":{"metadata":{"labels":{"app":"bench"}}` +
		`,"spec":{"containers":[{"name":"app","image":"registry.example.com/bench/app:1.0","env":[{"name":"PAD","value":"` +
		padding +
		`"}],"resources":{"limits":{"cpu":"500m","memory":"256Mi"}}}]}}},"status":{"replicas":3,"readyReplicas":3,` +
		`"observedGeneration":` + g + `}}`
}

// padding: random text (it does not compress), as bench_writer's Padding.
func padding(objectBytes int) string {
	n := max(16, objectBytes-650)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	rng := rand.New(rand.NewSource(1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.Intn(len(alphabet))]
	}
	return string(b)
}

func newClient(ctx context.Context, endpoint string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:          []string{endpoint},
		DialTimeout:        30 * time.Second,
		MaxCallSendMsgSize: 2 * 1024 * 1024,
		MaxCallRecvMsgSize: 1 << 30,
		Logger:             zap.NewNop(),
		Context:            ctx,
	})
	if err != nil {
		die("connect %s: %v", endpoint, err)
	}
	return c
}

// revisions: each key's mod_revision as the writer last saw it, kept in
// --revs FILE between runs ("KEY REV" lines), as kube-apiserver keeps them
// in its watch cache.
type revisions struct {
	sync.Mutex
	m map[string]int64
}

func loadRevisions(file string) *revisions {
	r := &revisions{m: map[string]int64{}}
	f, err := os.Open(file)
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			r.m[k] = n
		}
	}
	return r
}

func (r *revisions) get(key string) int64 {
	r.Lock()
	defer r.Unlock()
	return r.m[key]
}

func (r *revisions) set(key string, rev int64) {
	r.Lock()
	defer r.Unlock()
	r.m[key] = rev
}

func (r *revisions) save(file string) {
	r.Lock()
	defer r.Unlock()
	var b strings.Builder
	for k, v := range r.m {
		fmt.Fprintf(&b, "%s %d\n", k, v)
	}
	writeAtomically(file, b.String())
}

func writeAtomically(file, text string) {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		die("write %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		die("rename %s: %v", tmp, err)
	}
}

// update: kube-apiserver's GuaranteedUpdate Txn; on a stale revision, the
// answer's current one and again. Returns the write's revision.
func update(ctx context.Context, c *clientv3.Client, key, value string, revs *revisions, retries *atomic.Uint64) int64 {
	rev := revs.get(key)
	for try := 0; ; try++ {
		var resp *clientv3.TxnResponse
		var err error
		if rev == 0 {
			resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, value)).Commit()
		} else {
			resp, err = c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, value)).Else(clientv3.OpGet(key)).Commit()
		}
		if err != nil {
			die("txn %s: %v", key, err)
		}
		if resp.Succeeded {
			revs.set(key, resp.Header.Revision)
			return resp.Header.Revision
		}
		if try >= 5 {
			die("txn %s: still conflicting after %d tries", key, try)
		}
		retries.Add(1)
		rev = 0
		if len(resp.Responses) > 0 {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				rev = kvs[0].ModRevision
			}
		}
		if rev == 0 { // a create that found the key: read its revision
			g, err := c.Get(ctx, key)
			if err != nil || len(g.Kvs) == 0 {
				die("get %s: %v", key, err)
			}
			rev = g.Kvs[0].ModRevision
		}
	}
}

func runWrite(args []string) {
	var o writeOptions
	fs := flag.NewFlagSet("kinebench write", flag.ExitOnError)
	fs.StringVar(&o.endpoint, "endpoint", "", "kine's address, HOST:PORT")
	fs.BoolVar(&o.setup, "setup", false, "create the objects")
	fs.StringVar(&o.mode, "mode", "one", "one or spread")
	fs.IntVar(&o.objects, "objects", 0, "objects per stream (0: the mode's default)")
	fs.IntVar(&o.objectBytes, "object-bytes", 1024, "about this many bytes of JSON per object")
	fs.Float64Var(&o.rate, "rate", 1000, "commits/s over all writers (0: as fast as they go)")
	fs.Float64Var(&o.duration, "duration", 0, "seconds")
	fs.Uint64Var(&o.count, "count", 0, "writes in total")
	fs.IntVar(&o.writers, "writers", 1, "writer connections, 1 to 64")
	fs.StringVar(&o.out, "out", "", "key=value results, renamed into place at the end")
	fs.StringVar(&o.revs, "revs", "", "the keys' revisions, read at the start and written at the end")
	fs.Parse(args)
	if o.endpoint == "" || (o.mode != "one" && o.mode != "spread") || o.writers < 1 || o.writers > 64 ||
		(!o.setup && o.duration <= 0 && o.count == 0) {
		die("write: --endpoint, --mode one|spread, --writers 1..64 and --duration or --count are required")
	}
	if o.objects <= 0 {
		o.objects = map[string]int{"one": 100, "spread": 4}[o.mode]
	}
	ts := targets(&o)
	pad := padding(o.objectBytes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	revs := &revisions{m: map[string]int64{}}
	if o.revs != "" {
		revs = loadRevisions(o.revs)
	}
	var retries atomic.Uint64

	if o.setup {
		c := newClient(ctx, o.endpoint)
		for i := range ts {
			update(ctx, c, ts[i].key(), objectJSON(&ts[i], "0:0:0", 1, pad), revs, &retries)
		}
		c.Close()
		if o.revs != "" {
			revs.save(o.revs)
		}
		fmt.Printf("setup_rows=%d\n", len(ts))
		return
	}

	var stop atomic.Bool
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sigs; stop.Store(true) }()

	type result struct {
		writes, lastSeq uint64
		maxUs           float64
	}
	results := make([]result, o.writers)
	var hist histogram
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(time.Duration(o.duration * float64(time.Second)))
	for w := 0; w < o.writers; w++ {
		var count uint64
		if o.count > 0 {
			count = o.count / uint64(o.writers)
			if uint64(w) < o.count%uint64(o.writers) {
				count++
			}
			if count == 0 {
				continue
			}
		}
		wg.Add(1)
		go func(w int, count uint64) {
			defer wg.Done()
			c := newClient(ctx, o.endpoint)
			defer c.Close()
			var period time.Duration
			if per := o.rate / float64(o.writers); per > 0 {
				period = time.Duration(float64(time.Second) / per)
			}
			next := time.Now()
			ti := w % len(ts)
			var seq uint64
			r := &results[w]
			for !stop.Load() {
				if count > 0 && seq >= count || count == 0 && !time.Now().Before(end) {
					break
				}
				if period > 0 {
					now := time.Now()
					if next.After(now) {
						time.Sleep(next.Sub(now))
					}
					// Behind by more than a second: do not burst to catch up.
					if next.Before(now.Add(-time.Second)) {
						next = now
					}
					next = next.Add(period)
				}
				t := &ts[ti]
				ti += o.writers
				if ti >= len(ts) {
					ti = w % len(ts)
				}
				seq++
				stampNs := time.Now().UnixNano()
				stamp := strconv.Itoa(w) + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.FormatInt(stampNs, 10)
				update(ctx, c, t.key(), objectJSON(t, stamp, seq, pad), revs, &retries)
				us := float64(time.Now().UnixNano()-stampNs) / 1e3
				hist.add(max(1, us))
				r.maxUs = max(r.maxUs, us)
			}
			r.writes, r.lastSeq = seq, seq
		}(w, count)
	}
	wg.Wait()
	seconds := time.Since(start).Seconds()
	var writes uint64
	maxUs := 0.0
	for _, r := range results {
		writes += r.writes
		maxUs = max(maxUs, r.maxUs)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "writes=%d\nseconds=%.3f\nrate=%.0f\nwriters=%d\nstatement_p50_us=%.0f\nstatement_p99_us=%.0f\nstatement_max_us=%.0f\nconflicts=%d\n",
		writes, seconds, float64(writes)/seconds, o.writers, hist.quantile(0.5), hist.quantile(0.99), maxUs, retries.Load())
	for w, r := range results {
		fmt.Fprintf(&b, "last_seq_%d=%d\n", w, r.lastSeq)
	}
	fmt.Print(b.String())
	if o.revs != "" {
		revs.save(o.revs)
	}
	if o.out != "" {
		writeAtomically(o.out, b.String())
	}
	if stop.Load() {
		os.Exit(130)
	}
}
