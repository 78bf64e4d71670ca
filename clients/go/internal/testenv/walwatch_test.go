package testenv

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// eventBound bounds the wait for one event: generous, for busy machines.
const eventBound = 30 * time.Second

// watchPods opens a watch of every cluster's pods from now on (a fresh RV:
// nothing of the past), ended at the test's end.
func watchPods(t *testing.T, w *Walwatch) watch.Interface {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rv, err := w.Client.FreshRV(ctx)
	if err != nil {
		t.Fatalf("FreshRV: %v", err)
	}
	wi, err := w.Client.Watch(ctx, walwatch.WatchRequest{Resource: Pods.GVR, Options: metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(wi.Stop)
	return wi
}

// nextEvent waits for the next event on wi, which must be of type typ
// about the object named name.
func nextEvent(t *testing.T, wi watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	select {
	case e, ok := <-wi.ResultChan():
		if !ok {
			t.Fatalf("the watch ended; want %s %s", typ, name)
		}
		u, isObject := e.Object.(*unstructured.Unstructured)
		if e.Type != typ || !isObject || u.GetName() != name {
			t.Fatalf("got %s %#v; want %s %s", e.Type, e.Object, typ, name)
		}
	case <-time.After(eventBound):
		t.Fatalf("no %s %s within %v", typ, name, eventBound)
	}
}

// noEvent checks that nothing arrives on wi for a while: for a walwatch
// that cannot have heard of a write (its connection paused), anything would
// be wrong, so a short wait cannot fail a correct run.
func noEvent(t *testing.T, wi watch.Interface, wait time.Duration) {
	t.Helper()
	select {
	case e := <-wi.ResultChan():
		t.Fatalf("got %s %#v; want nothing yet", e.Type, e.Object)
	case <-time.After(wait):
	}
}

// A walwatch on PostgreSQL gets ready, serves a watch and TCP, survives its
// restart and its kill, and keeps its slot.
func TestWalwatchPostgres(t *testing.T) {
	db := NewPostgres(t)
	w := StartWalwatch(t, db, WalwatchOptions{TCP: true, MaxLogBytes: "8Mi"})
	if w.Slot != db.Name {
		t.Errorf("Slot = %q, want the database's name %q", w.Slot, db.Name)
	}
	testWalwatchLifecycle(t, db, w)

	var active bool
	if err := db.SQL.QueryRow("SELECT active FROM pg_replication_slots WHERE slot_name = $1", w.Slot).Scan(&active); err != nil || !active {
		t.Errorf("slot %s: active=%v, %v; want an active slot", w.Slot, active, err)
	}
	// A second walwatch on the same database takes a slot of its own.
	if w2 := StartWalwatch(t, db, WalwatchOptions{}); w2.Slot == w.Slot {
		t.Errorf("two walwatches on slot %s", w.Slot)
	}
}

func TestWalwatchMariaDB(t *testing.T) {
	db := NewMariaDB(t)
	w := StartWalwatch(t, db, WalwatchOptions{TCP: true})
	if !strings.Contains(strings.Join(w.argv, " "), "--replay-window 0s") {
		t.Errorf("argv %q: no --replay-window 0s", w.argv)
	}
	testWalwatchLifecycle(t, db, w)
	// Args replace a default.
	w2 := StartWalwatch(t, db, WalwatchOptions{Args: []string{"--replay-window=1m"}})
	if strings.Contains(strings.Join(w2.argv, " "), "--replay-window 0s") || w2.ServerIDFrom == w.ServerIDFrom {
		t.Errorf("argv %q: --replay-window 0s beside Args' window, or the first walwatch's server id", w2.argv)
	}
	// RestartWith replaces a flag, in either form, and adds the others.
	w2.RestartWith(t, "--replay-window", "0s", "--bookmark-interval=2s")
	argv := strings.Join(w2.argv, " ")
	if strings.Contains(argv, "1m") || strings.Count(argv, "--replay-window") != 1 ||
		!strings.HasSuffix(argv, "--replay-window 0s --bookmark-interval=2s") || !w2.Running() {
		t.Errorf("after RestartWith: argv %q, running %v", argv, w2.Running())
	}
}

func testWalwatchLifecycle(t *testing.T, db *DB, w *Walwatch) {
	ctx := context.Background()
	writer := NewWriter(db, WriterConfig{Seed: 2, Resources: []Resource{Pods}})

	resp, err := http.Get(w.TCPEndpoint + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz over TCP: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz over TCP: %d %s", resp.StatusCode, body)
	}
	w.WaitLog(t, `"log-level":"debug"`, 10*time.Second) // the flag reached walwatch

	wi := watchPods(t, w)
	if err := writer.Put(ctx, Pods, "c1", "default", "before-restart", nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, wi, watch.Added, "before-restart")

	pid := w.Pid()
	w.Restart(t)
	if w.Pid() == pid || !w.Running() {
		t.Fatalf("Restart: pid %d -> %d, running %v", pid, w.Pid(), w.Running())
	}
	wi = watchPods(t, w)
	if err := writer.Put(ctx, Pods, "c1", "default", "after-restart", nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, wi, watch.Added, "after-restart")

	w.Kill(t)
	if w.Running() {
		t.Fatal("Kill: still running")
	}
	w.Start(t)
	wi = watchPods(t, w)
	if err := writer.Delete(ctx, Pods, "c1", "default", "after-restart"); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, wi, watch.Deleted, "after-restart")
	if n := strings.Count(w.Stderr(), `"msg":"starting walwatch"`); n != 3 {
		t.Errorf("Stderr holds %d starts, want 3 (start, restart, start after kill)", n)
	}
}

// Through a proxy, a paused connection holds walwatch's events back until
// Resume, and after CutAll walwatch reconnects by itself.
func TestWalwatchViaProxyPostgres(t *testing.T) {
	ctx := context.Background()
	db := NewPostgres(t)
	proxy := NewProxy(t, db.Addr())
	w := StartWalwatch(t, db, WalwatchOptions{ViaProxy: proxy})
	if proxy.Connections() == 0 {
		t.Fatal("walwatch is ready, but no connection went through the proxy")
	}
	writer := NewWriter(db, WriterConfig{Seed: 3, Resources: []Resource{Pods}})
	wi := watchPods(t, w)

	proxy.Pause()
	if err := writer.Put(ctx, Pods, "c1", "default", "while-paused", nil); err != nil {
		t.Fatal(err)
	}
	noEvent(t, wi, 500*time.Millisecond)
	proxy.Resume()
	nextEvent(t, wi, watch.Added, "while-paused")

	proxy.CutAll()
	if err := writer.Put(ctx, Pods, "c1", "default", "after-cut", nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, wi, watch.Added, "after-cut")
}

// A walwatch that cannot start fails the test at once, with its stderr.
func TestStartWalwatchFailurePostgres(t *testing.T) {
	db := NewPostgres(t)
	start := time.Now()
	msg := fatalOf(t, func(t testing.TB) {
		StartWalwatch(t, db, WalwatchOptions{Args: []string{"--log-level", "shouting"}})
	})
	if !strings.Contains(msg, "exited before it was ready") || !strings.Contains(msg, "shouting") {
		t.Errorf("Fatal %q; want walwatch's exit, with its stderr", msg)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the failure took %v; want it as soon as walwatch exited", time.Since(start))
	}
}
