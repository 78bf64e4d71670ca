package apistorage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// resultBuffer is how many events a watch holds for a reader that lags, as
// etcd3's watcher holds 100.
const resultBuffer = 100

// watchRequest is walwatch's watch of sc: the store's resource and cluster,
// the namespace, and one object's name as a field selector.
func (s *Store) watchRequest(sc scope) walwatch.WatchRequest {
	req := walwatch.WatchRequest{Resource: s.cfg.Resource, Cluster: s.cfg.Cluster, Decoder: s.cfg.Codec}
	switch {
	case sc.single != nil:
		req.Namespace = sc.single.namespace
		set := fields.Set{"metadata.name": sc.single.name}
		if sc.single.namespace == "" {
			set["metadata.namespace"] = ""
		}
		req.Options.FieldSelector = fields.SelectorFromSet(set).String()
	case !sc.all:
		req.Namespace = sc.namespace
	}
	return req
}

// Watch serves a watch as etcd3's watcher does: initial events, when asked
// for, from a list of the table in a snapshot, with each object's own RV;
// then walwatch's events after the snapshot's RV (or after the given one),
// filtered by the predicate here. It returns once the watch's start is
// fixed (the snapshot taken, or the current RV read), so that every write
// that commits after it returns is in the watch.
func (s *Store) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	sc, err := s.parseKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	rv, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		store:  s,
		sc:     sc,
		opts:   opts,
		filter: newFilter(opts.Predicate),
		result: make(chan watch.Event, resultBuffer),
		cancel: cancel,
	}
	if ctx.Err() != nil {
		// A watch with a cancelled context ends at once, without an event.
		w.Stop()
		close(w.result)
		return w, nil
	}
	initial := opts.SendInitialEvents == nil && rv == 0 || opts.SendInitialEvents != nil && *opts.SendInitialEvents
	var snap *walwatch.Snapshot
	from := rv
	switch {
	case initial:
		if snap, err = s.beginSnapshot(ctx); err != nil {
			return w.failed(err), nil
		}
		// The initial state is at from (the snapshot's RV, or rv when it
		// shows rv's state): the stream from there follows it exactly.
		if from, err = notOlder(snap, rv); err != nil {
			snap.Close()
			return w.failed(err), nil
		}
	case rv == 0:
		if from, err = s.freshRV(ctx); err != nil {
			return w.failed(err), nil
		}
	}
	go w.run(wctx, from, snap)
	return w, nil
}

type watcher struct {
	store  *Store
	sc     scope
	opts   storage.ListOptions
	filter *filter
	result chan watch.Event
	cancel context.CancelFunc
	once   sync.Once
}

func (w *watcher) Stop()                          { w.once.Do(w.cancel) }
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// failed is w ended at once with err as its only event (an ERROR, as etcd3's
// watcher reports what goes wrong after the request was accepted).
func (w *watcher) failed(err error) *watcher {
	w.Stop()
	ev := watch.Event{Type: watch.Error, Object: statusOf(err)}
	w.result <- ev
	close(w.result)
	return w
}

// send delivers ev, unless the watch is stopped.
func (w *watcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// fail ends the watch with an ERROR event carrying err's Status.
func (w *watcher) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	w.send(ctx, watch.Event{Type: watch.Error, Object: statusOf(err)})
}

// statusOf is err's Status: its own, or a 500's.
func statusOf(err error) *metav1.Status {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		status := se.Status()
		return &status
	}
	return &apierrors.NewInternalError(err).ErrStatus
}

func (w *watcher) bookmark(rv uint64, initialEventsEnd bool) (watch.Event, error) {
	obj := w.store.cfg.NewFunc()
	if err := w.store.versioner.UpdateObject(obj, rv); err != nil {
		return watch.Event{}, err
	}
	if initialEventsEnd {
		a, err := meta.Accessor(obj)
		if err != nil {
			return watch.Event{}, err
		}
		a.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}, nil
}

// run sends the initial events read in snap, if any, then the events
// after from.
func (w *watcher) run(ctx context.Context, from uint64, snap *walwatch.Snapshot) {
	defer close(w.result)
	defer w.Stop()
	utilflowcontrol.WatchInitialized(ctx)
	s := w.store
	if snap != nil {
		if err := w.sendInitialEvents(ctx, snap, from); err != nil {
			w.fail(ctx, err)
			return
		}
	}

	req := s.watchRequest(w.sc)
	req.Options.ResourceVersion = strconv.FormatUint(from, 10)
	bookmarks := w.opts.Predicate.AllowWatchBookmarks || w.opts.ProgressNotify
	req.Options.AllowWatchBookmarks = bookmarks
	ww, err := s.cfg.Client.Watch(ctx, req)
	if err != nil {
		w.fail(ctx, err)
		return
	}
	defer ww.Stop()
	for ev := range ww.ResultChan() {
		switch ev.Type {
		case watch.Error:
			w.send(ctx, ev)
			return
		case watch.Bookmark:
			if !bookmarks {
				continue
			}
			brv, err := s.versioner.ObjectResourceVersion(ev.Object)
			if err != nil {
				w.fail(ctx, err)
				return
			}
			b, err := w.bookmark(brv, false)
			if err != nil {
				w.fail(ctx, err)
				return
			}
			if !w.send(ctx, b) {
				return
			}
		default:
			if err := dropMemberRV(ev.Object); err != nil {
				w.fail(ctx, err)
				return
			}
			out, ok, err := w.filter.apply(ev)
			if err != nil {
				w.fail(ctx, err)
				return
			}
			if ok && !w.send(ctx, out) {
				return
			}
		}
	}
}

// sendInitialEvents lists sc in snap, whose RV is at, and sends an ADDED
// event for each object the predicate selects, then the end bookmark of a
// WatchList. It closes snap.
func (w *watcher) sendInitialEvents(ctx context.Context, snap *walwatch.Snapshot, at uint64) error {
	s := w.store
	defer snap.Close()
	rows, err := s.readScope(ctx, snap.Queryer(), w.sc)
	if err != nil {
		return err
	}
	if err := snap.Close(); err != nil {
		return storage.NewInternalError(err)
	}
	for _, r := range rows {
		rv, err := s.resolve(ctx, r.objectKey, r.columnRV)
		if err != nil {
			return err
		}
		obj := s.cfg.NewFunc()
		if err := s.decode(r.object, obj, rv); err != nil {
			return err
		}
		out, ok, err := w.filter.apply(watch.Event{Type: watch.Added, Object: obj})
		if err != nil {
			return err
		}
		if ok && !w.send(ctx, out) {
			return ctx.Err()
		}
	}
	if sie := w.opts.SendInitialEvents; sie != nil && *sie && w.opts.Predicate.AllowWatchBookmarks {
		b, err := w.bookmark(at, true)
		if err != nil {
			return err
		}
		if !w.send(ctx, b) {
			return ctx.Err()
		}
	}
	return nil
}

// dropMemberRV removes the annotation walwatch adds to every object (here
// it holds the write id, which the object's RV has replaced).
func dropMemberRV(obj runtime.Object) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	ann := a.GetAnnotations()
	if _, ok := ann[memberRVAnnotation]; !ok {
		return nil
	}
	delete(ann, memberRVAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	a.SetAnnotations(ann)
	return nil
}
