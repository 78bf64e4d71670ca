package apistorage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// memberRVAnnotation is where walwatch moves a row's
// metadata.resourceVersion (here: the write id) in the events it sends.
const memberRVAnnotation = "walwatch.clusterpedia.io/member-resource-version"

// maxTailEntries bounds what a tail remembers: a write id is looked up
// within moments of its commit (by its writer, or by a reader that met it
// before the writer recorded the RV), so the oldest are dropped first.
const maxTailEntries = 1 << 16

// errTailGap means the tail lost its place in walwatch's stream (a 410):
// the RV of a write committed in the gap cannot be learned from it.
var errTailGap = errors.New("apistorage: walwatch's stream of this store had a gap (410); the write's RV is unknown")

// tailKey names an event the tail saw: a write id and whether the event was
// the deletion of the version that write made.
type tailKey struct {
	writeID string
	deleted bool
}

// tail is one walwatch watch over the whole store (its resource and
// cluster), kept open for the store's life, that maps each write id to the
// RV of the event carrying it.
type tail struct {
	client *walwatch.Client
	req    walwatch.WatchRequest

	mu      sync.Mutex
	seen    map[tailKey]uint64
	order   []tailKey // insertion order, for the bound
	waiters map[tailKey][]chan uint64
	rv      uint64 // the stream's position: its last event or bookmark
}

func newTail(client *walwatch.Client, req walwatch.WatchRequest, from uint64) *tail {
	t := &tail{
		client:  client,
		req:     req,
		seen:    map[tailKey]uint64{},
		waiters: map[tailKey][]chan uint64{},
		rv:      from,
	}
	return t
}

// run follows the stream until ctx ends, resuming from its position after
// any error, and from a fresh RV after a 410.
func (t *tail) run(ctx context.Context) {
	const minBackoff = 50 * time.Millisecond
	backoff := minBackoff
	for ctx.Err() == nil {
		streamed, err := t.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if streamed {
			backoff = minBackoff
		}
		var status statusErr
		if errors.As(err, &status) && status.Code == 410 {
			rv, ferr := t.client.FreshRV(ctx)
			if ferr == nil {
				if n, perr := strconv.ParseUint(rv, 10, 64); perr == nil {
					klog.ErrorS(err, "apistorage: the store's stream lost its place; writes in the gap fall back to a fresh RV", "resource", t.req.Resource, "from", n)
					t.mu.Lock()
					t.rv = n
					for _, ws := range t.waiters {
						for _, w := range ws {
							close(w)
						}
					}
					t.waiters = map[tailKey][]chan uint64{}
					t.mu.Unlock()
				}
			}
		} else if err != nil {
			klog.V(2).InfoS("apistorage: the store's stream ended; resuming", "resource", t.req.Resource, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// statusErr carries a stream's ERROR event.
type statusErr struct{ *metav1.Status }

func (e statusErr) Error() string { return e.Status.Message }

// follow reads one stream from the tail's position until it ends; streamed
// is whether it delivered anything.
func (t *tail) follow(ctx context.Context) (streamed bool, err error) {
	t.mu.Lock()
	from := t.rv
	t.mu.Unlock()
	req := t.req
	req.Options.ResourceVersion = strconv.FormatUint(from, 10)
	req.Options.AllowWatchBookmarks = true
	w, err := t.client.Watch(ctx, req)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			if s, ok := ev.Object.(*metav1.Status); ok {
				return streamed, statusErr{s}
			}
			return streamed, fmt.Errorf("apistorage: an ERROR event of %T", ev.Object)
		}
		streamed = true
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
		if err != nil {
			return streamed, fmt.Errorf("apistorage: an event's resourceVersion %q: %w", u.GetResourceVersion(), err)
		}
		t.record(ev.Type, u.GetAnnotations()[memberRVAnnotation], rv)
	}
	return streamed, nil
}

func (t *tail) record(typ watch.EventType, writeID string, rv uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rv > t.rv {
		t.rv = rv
	}
	if typ == watch.Bookmark || !isWriteID(writeID) {
		return
	}
	k := tailKey{writeID: writeID, deleted: typ == watch.Deleted}
	if _, ok := t.seen[k]; !ok {
		t.order = append(t.order, k)
		if len(t.order) > maxTailEntries {
			delete(t.seen, t.order[0])
			t.order = t.order[1:]
		}
	}
	t.seen[k] = rv
	for _, w := range t.waiters[k] {
		w <- rv
	}
	delete(t.waiters, k)
}

// wait returns the RV of the event k, waiting for it until ctx ends or the
// stream has a gap (errTailGap).
func (t *tail) wait(ctx context.Context, k tailKey) (uint64, error) {
	t.mu.Lock()
	if rv, ok := t.seen[k]; ok {
		t.mu.Unlock()
		return rv, nil
	}
	ch := make(chan uint64, 1)
	t.waiters[k] = append(t.waiters[k], ch)
	t.mu.Unlock()
	select {
	case rv, ok := <-ch:
		if !ok {
			return 0, errTailGap
		}
		return rv, nil
	case <-ctx.Done():
		t.mu.Lock()
		ws := t.waiters[k]
		for i, w := range ws {
			if w == ch {
				t.waiters[k] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(t.waiters[k]) == 0 {
			delete(t.waiters, k)
		}
		t.mu.Unlock()
		return 0, ctx.Err()
	}
}
