package walwatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// iterations is how often each race-prone scenario is run.
const iterations = 100

// idleStream answers a watch with one event, then sends nothing until the
// client leaves.
func (f *fakeWalwatch) idleStream() func(w http.ResponseWriter, r *http.Request, rec *recorded) {
	return f.stream(false, eventLine("ADDED", podJSON("web-0", "22381935")))
}

// busyStream answers a watch with ADDED events, as fast as the client takes
// them, until the client leaves.
func (f *fakeWalwatch) busyStream() func(w http.ResponseWriter, r *http.Request, rec *recorded) {
	return func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		startStream(w)
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				close(rec.Gone)
				return
			case <-f.quit:
				return
			default:
			}
			if writeChunk(w, eventLine("ADDED", podJSON(fmt.Sprintf("p-%d", i), strconv.Itoa(22381936+i)))) != nil {
				break
			}
		}
		f.block(r, rec)
	}
}

// consume reads w's channel until it closes, on a goroutine of its own, and
// returns the events it read; it fails the test unless the channel closes
// within bound of done being closed.
func consume(t *testing.T, w watch.Interface, done <-chan struct{}) func() []watch.Event {
	var events []watch.Event
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for ev := range w.ResultChan() {
			events = append(events, ev)
		}
	}()
	return func() []watch.Event {
		t.Helper()
		<-done
		select {
		case <-closed:
		case <-time.After(bound):
			t.Fatalf("the result channel did not close within %v", bound)
		}
		return events
	}
}

// checkOnlyAdded fails the test unless events are the busy stream's ADDED
// events, in order, from the first.
func checkOnlyAdded(t *testing.T, events []watch.Event, from int) {
	t.Helper()
	for i, ev := range events {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("event %d: %s %#v, want only ADDED events (no spurious ERROR)", from+i, ev.Type, ev.Object)
		}
		if want := fmt.Sprintf("p-%d", from+i); u.GetName() != want {
			t.Fatalf("event %d: %s, want %s", from+i, u.GetName(), want)
		}
	}
}

// Cancelling the watch's context, or its deadline passing, while walwatch
// sends nothing closes the channel with no event, and the connection.
func TestWatchContextEndWhileIdleClosesWithoutEvent(t *testing.T) {
	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			f := startFake(t, "unix", nil)
			f.setHandler(f.idleStream())
			c := f.client(t)
			for i := 0; i < iterations; i++ {
				var ctx context.Context
				var cancel context.CancelFunc
				if how == "cancel" {
					ctx, cancel = context.WithCancel(context.Background())
				} else {
					ctx, cancel = newDeadlineCtx()
				}
				w, err := c.Watch(ctx, podsRequest)
				if err != nil {
					cancel()
					t.Fatalf("iteration %d: %v", i, err)
				}
				checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
				cancelled := make(chan struct{})
				wait := consume(t, w, cancelled)
				cancel()
				close(cancelled)
				if events := wait(); len(events) != 0 {
					t.Fatalf("iteration %d: after the context ended: %s %#v, want no event", i, events[0].Type, events[0].Object)
				}
				expectGone(t, f.last(t))
			}
		})
	}
}

// deadlineCtx is a context whose deadline passes when the test says so:
// Done closes and Err is context.DeadlineExceeded, as when a request's
// deadline passes, without a race between the deadline and the watch's
// start.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx() (context.Context, context.CancelFunc) {
	c := &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
	return c, func() { c.once.Do(func() { close(c.done) }) }
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Cancelling the context while walwatch is sending ends the stream soon;
// the events that were already read pass, and nothing else (no ERROR).
func TestWatchContextCancelWhileSendingClosesWithoutError(t *testing.T) {
	f := startFake(t, "unix", nil)
	f.setHandler(f.busyStream())
	c := f.client(t)
	for i := 0; i < iterations; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		w, err := c.Watch(ctx, podsRequest)
		if err != nil {
			cancel()
			t.Fatalf("iteration %d: %v", i, err)
		}
		var first []watch.Event
		for j := 0; j < 3; j++ {
			first = append(first, next(t, w))
		}
		checkOnlyAdded(t, first, 0)
		cancelled := make(chan struct{})
		wait := consume(t, w, cancelled)
		cancel()
		close(cancelled)
		checkOnlyAdded(t, wait(), 3)
		expectGone(t, f.last(t))
	}
}

// Stop, while the consumer is blocked reading the channel and walwatch
// sends nothing, closes the channel with no event, and the connection:
// walwatch sees its request's context end.
func TestWatchStopWhileIdleClosesWithoutEvent(t *testing.T) {
	for _, transport := range []string{"unix", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			f := startFake(t, transport, nil)
			f.setHandler(f.idleStream())
			c := f.client(t)
			for i := 0; i < iterations; i++ {
				w, err := c.Watch(context.Background(), podsRequest)
				if err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
				stopped := make(chan struct{})
				wait := consume(t, w, stopped)
				w.Stop()
				w.Stop() // again: harmless
				close(stopped)
				if events := wait(); len(events) != 0 {
					t.Fatalf("iteration %d: after Stop: %s %#v, want no event", i, events[0].Type, events[0].Object)
				}
				expectGone(t, f.last(t))
			}
		})
	}
}

// Stop while walwatch sends and the consumer reads concurrently: the channel
// closes, with no ERROR event, and walwatch sees the connection closed.
func TestWatchStopWhileSendingClosesWithoutError(t *testing.T) {
	f := startFake(t, "unix", nil)
	f.setHandler(f.busyStream())
	c := f.client(t)
	for i := 0; i < iterations; i++ {
		w, err := c.Watch(context.Background(), podsRequest)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		read := make(chan struct{})
		var events []watch.Event
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			for ev := range w.ResultChan() {
				events = append(events, ev)
				if len(events) == 3 {
					close(read)
				}
			}
		}()
		select {
		case <-read:
		case <-closed:
			t.Fatalf("iteration %d: the channel closed after %d events", i, len(events))
		case <-time.After(bound):
			t.Fatalf("iteration %d: no 3 events within %v", i, bound)
		}
		w.Stop()
		select {
		case <-closed:
		case <-time.After(bound):
			t.Fatalf("iteration %d: the result channel did not close within %v of Stop", i, bound)
		}
		checkOnlyAdded(t, events, 0)
		expectGone(t, f.last(t))
	}
}

// Stop and the context's cancellation at once, from different goroutines,
// with the consumer reading: no panic, no event, the channel closes.
func TestWatchStopAndCancelTogether(t *testing.T) {
	f := startFake(t, "unix", nil)
	f.setHandler(f.idleStream())
	c := f.client(t)
	for i := 0; i < iterations; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		w, err := c.Watch(ctx, podsRequest)
		if err != nil {
			cancel()
			t.Fatalf("iteration %d: %v", i, err)
		}
		next(t, w)
		done := make(chan struct{})
		wait := consume(t, w, done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); w.Stop() }()
		go func() { defer wg.Done(); cancel() }()
		wg.Wait()
		close(done)
		if events := wait(); len(events) != 0 {
			t.Fatalf("iteration %d: %s %#v, want no event", i, events[0].Type, events[0].Object)
		}
		expectGone(t, f.last(t))
	}
}

// Cancelling while walwatch has not answered yet (it waits for the initial
// state's RV) returns the context's error, not a Status, and closes the
// connection.
func TestWatchCancelledBeforeTheHeader(t *testing.T) {
	f := startFake(t, "unix", nil)
	arrived := make(chan struct{}, 1)
	f.setHandler(func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		arrived <- struct{}{}
		f.block(r, rec)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() {
		w, err := f.client(t).Watch(ctx, podsRequest)
		if err == nil {
			w.Stop()
		}
		result <- err
	}()
	select {
	case <-arrived:
	case <-time.After(bound):
		t.Fatalf("walwatch received no request within %v", bound)
	}
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Watch: %v, want context.Canceled", err)
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			t.Errorf("Watch: %v is a Status, want the context's error", err)
		}
	case <-time.After(bound):
		t.Fatalf("Watch did not return within %v of the cancellation", bound)
	}
	expectGone(t, f.only(t))
}

// RequestTimeout bounds handoffs, never a watch: a watch outlives it.
func TestRequestTimeoutDoesNotBoundWatches(t *testing.T) {
	f := startFake(t, "unix", nil)
	const timeout = 20 * time.Millisecond
	f.setHandler(func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		startStream(w)
		time.Sleep(10 * timeout) // the watch is past RequestTimeout
		writeChunk(w, eventLine("ADDED", podJSON("web-0", "22381935")))
		f.block(r, rec)
	})
	c := newClientFor(t, f, timeout)
	w, err := c.Watch(watchCtx(t), podsRequest)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
}
