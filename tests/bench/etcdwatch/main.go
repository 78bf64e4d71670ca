// etcdwatch: etcd_bench.sh's client for etcd. It watches etcd the way
// Kubernetes does, through etcd's own Go client (go.etcd.io/etcd/client/v3,
// gRPC over HTTP/2, protobuf), where fanout_client --etcd goes through
// etcd's JSON grpc-gateway, which no Kubernetes component uses and whose
// per-stream HTTP/1.1 and reflection-based JSON made etcd, not its watch,
// the thing measured. It opens N watches of every key under a prefix (those
// bench_writer --etcd writes) and reports what fanout_client reports, with
// the same keys and the same latency histogram, so etcd_bench.sh reads both
// alike.
//
//	etcdwatch --endpoint HOST:PORT --prefix P --watchers N
//	    [--mode per-stream|multiplexed] [--conns K] [--prev-kv]
//	    [--ready-file F] [--done-file F] [--check-seq] [--duration S]
//	    [--quiet-ms MS] [--drain-timeout S] [--connect-timeout S]
//	    [--report-every S] [--linger-file F]
//
// Modes:
//
//	per-stream   one clientv3.Client per watcher: one TCP connection and one
//	             gRPC watch stream each (what fanout_client does to walwatch:
//	             a connection per watcher).
//	multiplexed  N watchers over K clients (--conns, default 1), watcher i
//	             on client i % K. clientv3 puts every Watch of a client whose
//	             context carries the same metadata on one gRPC watch stream
//	             (watch.go, streamKeyFromCtx), so these are K connections and
//	             K streams, as kube-apiserver's watches of one etcd client
//	             share one stream. etcd still sends each watcher its own
//	             WatchResponse per revision.
//
// Each event's value is bench_writer's object JSON; its stamp annotation
// "bench.walwatch.io/stamp":"W:SEQ:NS" (in the metadata, near the start)
// gives commit -> receive latency: receive is the clock when the watcher's
// goroutine takes the WatchResponse off clientv3's channel (so the client's
// own protobuf decoding and hand-offs count against etcd; client_cpu_s and
// etcd_bench.sh's client CPU show how much room that has). mod_revision must
// increase along each watch; with --check-seq, SEQ must be the writer's
// previous SEQ + 1 on every watch (a gap counts lost events, a repeat a
// duplicate).
//
// --ready-file F is written once every watch has its created response
// (clientv3.WithCreatedNotify). --done-file F is bench_writer's --out: once
// it appears, the client waits until every watcher has each writer's
// last_seq_W (with --check-seq), or until no event has arrived for
// --quiet-ms, at most --drain-timeout seconds; --duration S stops after S
// seconds of streaming instead. --linger-file F: once the figures are printed,
// F is written and the watches stay open until SIGTERM or SIGINT, so that the
// server's memory can be read with them open.
//
// Prints key=value lines on stdout, those of fanout_client (watchers,
// connected, failed, streaming, events, event_bytes (the values' bytes),
// bookmarks (always 0: etcd's progress notifications are not asked for),
// errors, errors_410 (compacted), ended, lost, duplicates, out_of_order,
// short_at_end, samples, latency_p50_us, latency_p99_us, latency_p999_us,
// latency_max_us, last_event_ns, client_cpu_s, seconds, first_error) and
// mode, conns, deliveries_per_s (events over the first to the last event).
// Latency quantiles are the upper edge of the bin that reaches q in the
// histogram of tests/bench/latency_histogram.h (2,000 log bins from 1 us to
// 100 s; under 2^21 us the value is first truncated to whole microseconds,
// as fanout_client does). Exit status 0 unless a watcher could not be opened.
//
// Built by etcd_bench.sh (go build into the bench build directory, with the
// Go of tests/tools/install-go.sh); go.sum pins the client.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// bench_writer's --writers is 1 to 64: a watcher's last SEQ of each writer.
const maxWriters = 64

var stampKey = []byte(`"bench.walwatch.io/stamp":"`)

// histogram: latency_histogram.h's axis (2,000 log bins, 1 us to 1e8 us,
// plus underflow and overflow), counted atomically by every watcher.
type histogram struct {
	bins [2002]atomic.Uint64
}

const (
	histBins = 2000
	histMin  = 1.0
	histMax  = 1e8
)

var histLogSpan = math.Log(histMax / histMin)

func (h *histogram) add(us float64) {
	if us < 1 {
		us = 1
	} else if us < 1<<21 {
		us = math.Floor(us) // fanout_client's whole microseconds
	}
	var i int
	switch {
	case us < histMin:
		i = 0
	case us >= histMax:
		i = histBins + 1
	default:
		i = 1 + int(math.Log(us/histMin)/histLogSpan*histBins)
		if i > histBins {
			i = histBins
		}
	}
	h.bins[i].Add(1)
}

// quantile: the upper edge of the bin where the cumulative count reaches q.
func (h *histogram) quantile(q float64) float64 {
	var counts [2002]uint64
	var total uint64
	for i := range h.bins {
		counts[i] = h.bins[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return 0
	}
	var seen uint64
	for i, c := range counts {
		seen += c
		if float64(seen) >= q*float64(total) {
			switch {
			case i == 0:
				return histMin
			case i == histBins+1:
				return math.Inf(1)
			default:
				return histMin * math.Exp(float64(i)/histBins*histLogSpan)
			}
		}
	}
	return 0
}

type totals struct {
	events, eventBytes, errors, errors410, ended atomic.Uint64
	lost, duplicates, outOfOrder, samples        atomic.Uint64
	created                                      atomic.Int64
	maxNs, firstEventNs, lastEventNs             atomic.Int64
	latency                                      histogram
	firstErrorOnce                               sync.Once
	firstError                                   atomic.Value // string
}

func (t *totals) onError(msg string, compacted bool) {
	t.errors.Add(1)
	if compacted {
		t.errors410.Add(1)
	}
	t.firstErrorOnce.Do(func() {
		if len(msg) > 300 {
			msg = msg[:300]
		}
		t.firstError.Store(msg)
	})
}

func atomicMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// watcher: one watch; its fields are written by its own goroutine only,
// lastSeq also read by main for the end condition.
type watcher struct {
	lastRev int64
	lastSeq [maxWriters]atomic.Uint64
	closed  atomic.Bool
}

// parseStamp reads "W:SEQ:NS" from the value's stamp annotation.
func parseStamp(value []byte) (w, seq uint64, ns int64, ok bool) {
	at := bytes.Index(value, stampKey)
	if at < 0 {
		return 0, 0, 0, false
	}
	rest := value[at+len(stampKey):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0, 0, 0, false
	}
	parts := strings.SplitN(string(rest[:end]), ":", 3)
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	w, err1 = strconv.ParseUint(parts[0], 10, 64)
	seq, err2 = strconv.ParseUint(parts[1], 10, 64)
	ns, err3 = strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || ns == 0 { // setup: "0:0:0"
		return 0, 0, 0, false
	}
	return w, seq, ns, true
}

type options struct {
	endpoint, prefix, mode  string
	watchers, conns         int
	prevKV, checkSeq        bool
	readyFile, doneFile     string
	lingerFile              string
	duration, drainTimeout  float64
	connectTimeout, reportS float64
	quietMs                 int
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.endpoint, "endpoint", "", "etcd's client address, HOST:PORT")
	flag.StringVar(&o.prefix, "prefix", "/registry/apps/deployments/", "the key prefix to watch")
	flag.StringVar(&o.mode, "mode", "per-stream", "per-stream (a client per watcher) or multiplexed (--conns clients)")
	flag.IntVar(&o.watchers, "watchers", 1, "watches to open")
	flag.IntVar(&o.conns, "conns", 1, "multiplexed: clients (connections) the watchers are spread over")
	flag.BoolVar(&o.prevKV, "prev-kv", false, "ask for the previous value too (kube-apiserver's WithPrevKV)")
	flag.BoolVar(&o.checkSeq, "check-seq", false, "check each writer's SEQ is gapless on every watch")
	flag.StringVar(&o.readyFile, "ready-file", "", "written once every watch is created")
	flag.StringVar(&o.doneFile, "done-file", "", "bench_writer's --out: the end condition")
	flag.StringVar(&o.lingerFile, "linger-file", "", "after the report, write it and keep the watches until SIGTERM")
	flag.Float64Var(&o.duration, "duration", 0, "stop after S seconds of streaming")
	flag.Float64Var(&o.drainTimeout, "drain-timeout", 60, "seconds to wait for the last events once --done-file appears")
	flag.Float64Var(&o.connectTimeout, "connect-timeout", 120, "seconds for every watch to be created")
	flag.Float64Var(&o.reportS, "report-every", 0, "a progress line on stderr every S seconds")
	flag.IntVar(&o.quietMs, "quiet-ms", 1000, "without --check-seq: done after this long without an event")
	flag.Parse()
	if o.endpoint == "" || o.watchers < 1 || (o.mode != "per-stream" && o.mode != "multiplexed") {
		fmt.Fprintln(os.Stderr, "etcdwatch: --endpoint, --watchers >= 1 and --mode per-stream|multiplexed are required")
		flag.Usage()
		os.Exit(2)
	}
	if o.mode == "per-stream" {
		o.conns = o.watchers
	}
	if o.conns < 1 {
		o.conns = 1
	}
	if o.conns > o.watchers {
		o.conns = o.watchers
	}
	return o
}

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "etcdwatch: "+format+"\n", args...)
	os.Exit(1)
}

// readFinalSeqs: bench_writer's --out, last_seq_W=N lines (bench_util.h's
// ReadFinalSeqs); present is false until the file exists.
func readFinalSeqs(file string) (seqs []uint64, present bool) {
	f, err := os.Open(file)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "last_seq_") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "last_seq_"), "=")
		if !ok {
			continue
		}
		w, err1 := strconv.Atoi(k)
		n, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil || w < 0 || w >= maxWriters {
			continue
		}
		for len(seqs) <= w {
			seqs = append(seqs, 0)
		}
		seqs[w] = n
	}
	return seqs, true
}

func touch(file string) {
	if file == "" {
		return
	}
	if f, err := os.Create(file); err == nil {
		f.Close()
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// serve reads one watch's responses until its channel closes.
func serve(o *options, t *totals, w *watcher, ch clientv3.WatchChan, createdOnce *sync.Once) {
	defer func() {
		w.closed.Store(true)
		t.ended.Add(1)
	}()
	for resp := range ch {
		now := time.Now().UnixNano()
		if resp.Created {
			createdOnce.Do(func() { t.created.Add(1) })
		}
		if err := resp.Err(); err != nil {
			t.onError(err.Error(), resp.CompactRevision != 0)
			continue
		}
		if len(resp.Events) == 0 {
			continue
		}
		atomicMax(&t.lastEventNs, now)
		t.firstEventNs.CompareAndSwap(0, now)
		for _, ev := range resp.Events {
			t.events.Add(1)
			t.eventBytes.Add(uint64(len(ev.Kv.Value)))
			if rev := ev.Kv.ModRevision; rev != 0 {
				if rev == w.lastRev {
					t.duplicates.Add(1)
				} else if rev < w.lastRev {
					t.outOfOrder.Add(1)
				}
				w.lastRev = max(w.lastRev, rev)
			}
			wr, seq, ns, ok := parseStamp(ev.Kv.Value)
			if !ok {
				continue
			}
			t.latency.add(float64(now-ns) / 1e3)
			atomicMax(&t.maxNs, now-ns)
			t.samples.Add(1)
			if o.checkSeq && wr < maxWriters {
				last := w.lastSeq[wr].Load()
				if seq > last+1 {
					t.lost.Add(seq - last - 1)
				}
				if seq <= last {
					t.duplicates.Add(1)
				} else {
					w.lastSeq[wr].Store(seq)
				}
			}
		}
	}
}

func main() {
	o := parseFlags()
	// The client's garbage is ~1 KB per delivery (the decoded event): at
	// 20,000/s, GOGC's default 100 collects every few MB. Less often, unless
	// GOGC says otherwise: its CPU is the client's, not etcd's, but it
	// shares the machine (the client's memory is not measured).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The clients: kube-apiserver's settings (staging/src/k8s.io/apiserver/
	// pkg/storage/storagebackend/factory/etcd3.go): keepalive 30 s / 10 s,
	// 2 MiB requests, unlimited answers.
	clients := make([]*clientv3.Client, o.conns)
	failed := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32) // dial at most 32 at a time
	tStart := time.Now()
	for i := range clients {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := clientv3.New(clientv3.Config{
				Endpoints:            []string{o.endpoint},
				DialTimeout:          time.Duration(o.connectTimeout * float64(time.Second)),
				DialKeepAliveTime:    30 * time.Second,
				DialKeepAliveTimeout: 10 * time.Second,
				MaxCallSendMsgSize:   2 * 1024 * 1024,
				MaxCallRecvMsgSize:   math.MaxInt32,
				Logger:               zap.NewNop(),
				Context:              ctx,
			})
			if err != nil {
				mu.Lock()
				if failed == 0 {
					fmt.Fprintf(os.Stderr, "etcdwatch: connect %s: %v\n", o.endpoint, err)
				}
				failed++
				mu.Unlock()
				return
			}
			clients[i] = c
		}(i)
	}
	wg.Wait()
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "etcdwatch: %d of %d clients failed to connect\n", failed, o.conns)
	}

	t := &totals{}
	watchers := make([]*watcher, 0, o.watchers)
	var serving sync.WaitGroup
	opened := 0
	for i := 0; i < o.watchers; i++ {
		c := clients[i%o.conns]
		if c == nil {
			continue
		}
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCreatedNotify()}
		if o.prevKV {
			opts = append(opts, clientv3.WithPrevKV())
		}
		w := &watcher{}
		watchers = append(watchers, w)
		ch := c.Watch(ctx, o.prefix, opts...)
		opened++
		serving.Add(1)
		go func() {
			defer serving.Done()
			var once sync.Once
			serve(&o, t, w, ch, &once)
		}()
	}

	// Streaming: every watch created (or ended before it was).
	ready := false
	var tReady time.Time
	doneSeen := false
	var tDoneSeen time.Time
	var finalSeqs []uint64
	nextReport := time.Time{}
	nextDoneCheck := time.Time{}
	lastEvents := uint64(0)
	tLastEvent := time.Now()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	stopped := false
loop:
	for {
		select {
		case <-sigs:
			stopped = true
			break loop
		case <-ticker.C:
		}
		now := time.Now()
		if ev := t.events.Load(); ev != lastEvents {
			lastEvents, tLastEvent = ev, now
		}
		ended := int(t.ended.Load())
		if !ready && int(t.created.Load())+ended >= opened {
			ready = true
			tReady = now
			fmt.Fprintf(os.Stderr, "etcdwatch: %d watchers streaming over %d connections, %s (%.1f s to open)\n",
				t.created.Load(), o.conns-failed, o.mode, now.Sub(tStart).Seconds())
			touch(o.readyFile)
		}
		if !ready && now.Sub(tStart).Seconds() > o.connectTimeout {
			die("watchers not streaming after %.0f s: %d of %d", o.connectTimeout, t.created.Load(), opened)
		}
		if o.reportS > 0 && !now.Before(nextReport) {
			if !nextReport.IsZero() {
				fmt.Fprintf(os.Stderr, "etcdwatch: t=%.0f open=%d events=%d errors=%d ended=%d lost=%d duplicates=%d p99_ms=%.1f\n",
					now.Sub(tStart).Seconds(), opened-ended, t.events.Load(), t.errors.Load(), ended,
					t.lost.Load(), t.duplicates.Load(), t.latency.quantile(0.99)/1e3)
			}
			nextReport = now.Add(time.Duration(o.reportS * float64(time.Second)))
		}
		if ready && o.duration > 0 && now.Sub(tReady).Seconds() >= o.duration {
			break
		}
		if ready && o.doneFile != "" {
			if !doneSeen && !now.Before(nextDoneCheck) {
				nextDoneCheck = now.Add(100 * time.Millisecond)
				finalSeqs, doneSeen = readFinalSeqs(o.doneFile)
				if doneSeen {
					tDoneSeen = now
				}
			}
			if doneSeen {
				all := o.checkSeq
				for _, w := range watchers {
					if !all {
						break
					}
					if w.closed.Load() {
						continue
					}
					for wr, last := range finalSeqs {
						if last != 0 && w.lastSeq[wr].Load() < last {
							all = false
							break
						}
					}
				}
				if all {
					break
				}
				quiet := time.Duration(o.quietMs) * time.Millisecond
				if !o.checkSeq && now.Sub(tLastEvent) >= quiet && now.Sub(tDoneSeen) >= quiet {
					break
				}
				if now.Sub(tDoneSeen).Seconds() >= o.drainTimeout {
					fmt.Fprintf(os.Stderr, "etcdwatch: drain timed out after %.0f s\n", o.drainTimeout)
					break
				}
			}
		}
		if ready && ended >= opened {
			break
		}
	}

	shortAtEnd := 0
	if o.checkSeq && doneSeen {
		for _, w := range watchers {
			for wr, last := range finalSeqs {
				if last != 0 && w.lastSeq[wr].Load() < last {
					shortAtEnd++
					break
				}
			}
		}
	}
	cpu := cpuSeconds()
	seconds := time.Since(tStart).Seconds()
	if ready {
		seconds = time.Since(tReady).Seconds()
	}
	events := t.events.Load()
	rate := 0.0
	if span := t.lastEventNs.Load() - t.firstEventNs.Load(); span > 0 {
		rate = float64(events) / (float64(span) / 1e9)
	}
	firstError, _ := t.firstError.Load().(string)
	firstError = strings.NewReplacer("\n", " ", "'", `"`).Replace(firstError)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "mode=%s\nconns=%d\n", o.mode, o.conns)
	fmt.Fprintf(out, "watchers=%d\nconnected=%d\nfailed=%d\nstreaming=%d\n",
		o.watchers, opened, o.watchers-opened, t.created.Load())
	fmt.Fprintf(out, "events=%d\nevent_bytes=%d\nbookmarks=0\nerrors=%d\nerrors_410=%d\nended=%d\n"+
		"lost=%d\nduplicates=%d\nout_of_order=%d\nshort_at_end=%d\n",
		events, t.eventBytes.Load(), t.errors.Load(), t.errors410.Load(), t.ended.Load(),
		t.lost.Load(), t.duplicates.Load(), t.outOfOrder.Load(), shortAtEnd)
	fmt.Fprintf(out, "samples=%d\nlatency_p50_us=%.0f\nlatency_p99_us=%.0f\nlatency_p999_us=%.0f\nlatency_max_us=%.0f\n",
		t.samples.Load(), t.latency.quantile(0.5), t.latency.quantile(0.99), t.latency.quantile(0.999),
		float64(t.maxNs.Load())/1e3)
	fmt.Fprintf(out, "deliveries_per_s=%.0f\nlast_event_ns=%d\nclient_cpu_s=%.2f\nseconds=%.2f\nfirst_error='%s'\n",
		rate, t.lastEventNs.Load(), cpu, seconds, firstError)
	out.Flush()

	if o.lingerFile != "" && !stopped {
		touch(o.lingerFile)
		<-sigs
	}
	cancel()
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
