package main

// The watchers: what fanout_client reports, for kine's etcd API (the loop
// and figures of tests/bench/etcdwatch, with a prefix per watcher).

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
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

const maxWriters = 64

var stampKey = []byte(`"bench.walwatch.io/stamp":"`)

type watchOptions struct {
	endpoint, prefix, prefixesFile string
	watchers                       int
	checkSeq                       bool
	readyFile, doneFile            string
	duration, drainTimeout         float64
	connectTimeout                 float64
	quietMs                        int
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
	t.firstErrorOnce.Do(func() { t.firstError.Store(msg[:min(len(msg), 300)]) })
}

func atomicMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// watcher: one watch; written by its own goroutine, lastSeq and closed also
// read by main for the end condition.
type watcher struct {
	lastRev int64
	lastSeq [maxWriters]atomic.Uint64
	closed  atomic.Bool
}

// parseStamp reads "W:SEQ:NS" from the value's stamp annotation; false for
// the setup's "0:0:0".
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
	var e1, e2, e3 error
	w, e1 = strconv.ParseUint(parts[0], 10, 64)
	seq, e2 = strconv.ParseUint(parts[1], 10, 64)
	ns, e3 = strconv.ParseInt(parts[2], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || ns == 0 {
		return 0, 0, 0, false
	}
	return w, seq, ns, true
}

func serve(o *watchOptions, t *totals, w *watcher, ch clientv3.WatchChan) {
	defer func() {
		w.closed.Store(true)
		t.ended.Add(1)
	}()
	created := false
	for resp := range ch {
		now := time.Now().UnixNano()
		if resp.Created && !created {
			created = true
			t.created.Add(1)
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

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// readFinalSeqs: bench_writer's --out, last_seq_W=N lines; present is false
// until the file exists.
func readFinalSeqs(file string) (seqs []uint64, present bool) {
	f, err := os.Open(file)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "last_seq_"), "=")
		if !ok || !strings.HasPrefix(sc.Text(), "last_seq_") {
			continue
		}
		w, e1 := strconv.Atoi(k)
		n, e2 := strconv.ParseUint(v, 10, 64)
		if e1 != nil || e2 != nil || w < 0 || w >= maxWriters {
			continue
		}
		for len(seqs) <= w {
			seqs = append(seqs, 0)
		}
		seqs[w] = n
	}
	return seqs, true
}

func runWatch(args []string) {
	var o watchOptions
	fs := flag.NewFlagSet("kinebench watch", flag.ExitOnError)
	fs.StringVar(&o.endpoint, "endpoint", "", "kine's address, HOST:PORT")
	fs.StringVar(&o.prefix, "prefix", "", "the key prefix every watcher watches")
	fs.StringVar(&o.prefixesFile, "prefixes-file", "", "watcher i watches line i % lines")
	fs.IntVar(&o.watchers, "watchers", 1, "watches to open, one connection each")
	fs.BoolVar(&o.checkSeq, "check-seq", false, "check each writer's SEQ is gapless on every watch")
	fs.StringVar(&o.readyFile, "ready-file", "", "written once every watch is created")
	fs.StringVar(&o.doneFile, "done-file", "", "the writer's --out: the end condition")
	fs.Float64Var(&o.duration, "duration", 0, "stop after S seconds of streaming")
	fs.Float64Var(&o.drainTimeout, "drain-timeout", 60, "seconds to wait for the last events once --done-file appears")
	fs.Float64Var(&o.connectTimeout, "connect-timeout", 120, "seconds for every watch to be created")
	fs.IntVar(&o.quietMs, "quiet-ms", 1000, "without --check-seq: done after this long without an event")
	fs.Parse(args)
	var prefixes []string
	if o.prefixesFile != "" {
		text, err := os.ReadFile(o.prefixesFile)
		if err != nil {
			die("%v", err)
		}
		prefixes = strings.Fields(string(text))
	} else if o.prefix != "" {
		prefixes = []string{o.prefix}
	}
	if o.endpoint == "" || o.watchers < 1 || len(prefixes) == 0 {
		die("watch: --endpoint, --prefix or --prefixes-file, and --watchers >= 1 are required")
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A client per watcher (kube-apiserver's keepalive settings), dialled
	// 32 at a time.
	clients := make([]*clientv3.Client, o.watchers)
	var failed atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
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
				MaxCallRecvMsgSize:   math.MaxInt32,
				Logger:               zap.NewNop(),
				Context:              ctx,
			})
			if err != nil {
				if failed.Add(1) == 1 {
					fmt.Fprintf(os.Stderr, "kinebench: connect %s: %v\n", o.endpoint, err)
				}
				return
			}
			clients[i] = c
		}(i)
	}
	wg.Wait()

	t := &totals{}
	var watchers []*watcher
	opened := 0
	for i, c := range clients {
		if c == nil {
			continue
		}
		w := &watcher{}
		watchers = append(watchers, w)
		ch := c.Watch(ctx, prefixes[i%len(prefixes)], clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		opened++
		go serve(&o, t, w, ch)
	}

	ready, doneSeen := false, false
	var tReady, tDoneSeen time.Time
	var finalSeqs []uint64
	nextDoneCheck := time.Time{}
	lastEvents := uint64(0)
	tLastEvent := time.Now()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-sigs:
			break loop
		case <-ticker.C:
		}
		now := time.Now()
		if ev := t.events.Load(); ev != lastEvents {
			lastEvents, tLastEvent = ev, now
		}
		ended := int(t.ended.Load())
		if !ready && int(t.created.Load())+ended >= opened {
			ready, tReady = true, now
			fmt.Fprintf(os.Stderr, "kinebench: %d watchers streaming (%.1f s to open)\n",
				t.created.Load(), now.Sub(tStart).Seconds())
			if o.readyFile != "" {
				os.WriteFile(o.readyFile, nil, 0o644)
			}
		}
		if !ready && now.Sub(tStart).Seconds() > o.connectTimeout {
			die("watchers not streaming after %.0f s: %d of %d", o.connectTimeout, t.created.Load(), opened)
		}
		if ready && o.duration > 0 && now.Sub(tReady).Seconds() >= o.duration {
			break
		}
		if ready && o.doneFile != "" {
			if !doneSeen && !now.Before(nextDoneCheck) {
				nextDoneCheck = now.Add(100 * time.Millisecond)
				if finalSeqs, doneSeen = readFinalSeqs(o.doneFile); doneSeen {
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
					fmt.Fprintf(os.Stderr, "kinebench: drain timed out after %.0f s\n", o.drainTimeout)
					break
				}
			}
		}
		if ready && ended >= opened {
			break
		}
	}

	// (--check-seq only where every watcher sees every write: one prefix.)
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
	cancel()
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
	if failed.Load() > 0 {
		os.Exit(1)
	}
}
