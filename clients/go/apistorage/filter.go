package apistorage

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// filter applies a watch's predicate to its events as etcd3's watcher does
// with etcd's previous values: an object that starts to match is ADDED, one
// that stops matching is DELETED (its last matching state, at the new RV),
// one that matches before and after is MODIFIED.
//
// walwatch's events carry no previous state (it sends one only when labels
// change, and only for its own selectors), so the filter remembers, for
// each object this watch has seen, its last state if it matched. For an
// object first seen in a MODIFIED event (it existed before the watch
// started, and no initial events listed it), the previous state is
// unknown: a MODIFIED that matches is sent as MODIFIED, one that does not
// as DELETED with the new state. An informer handles both: it upserts the
// first, and deletes the second if it holds it.
type filter struct {
	pred       storage.SelectionPredicate
	everything bool
	// matched holds the last state of each seen object that matched;
	// unmatched the seen ones that did not.
	matched   map[objectKey]runtime.Object
	unmatched map[objectKey]bool
}

func newFilter(pred storage.SelectionPredicate) *filter {
	return &filter{
		pred:       pred,
		everything: (pred.Label == nil || pred.Label.Empty()) && (pred.Field == nil || pred.Field.Empty()),
		matched:    map[objectKey]runtime.Object{},
		unmatched:  map[objectKey]bool{},
	}
}

// apply returns the event to send for ev, if any.
func (f *filter) apply(ev watch.Event) (watch.Event, bool, error) {
	if f.everything {
		return ev, true, nil
	}
	a, err := meta.Accessor(ev.Object)
	if err != nil {
		return watch.Event{}, false, err
	}
	k := objectKey{a.GetNamespace(), a.GetName()}
	cur, err := f.pred.Matches(ev.Object)
	if err != nil {
		return watch.Event{}, false, err
	}
	prev, wasMatched := f.matched[k]
	known := wasMatched || f.unmatched[k]

	if ev.Type == watch.Deleted {
		delete(f.matched, k)
		delete(f.unmatched, k)
		if wasMatched || !known && cur {
			return ev, true, nil
		}
		return watch.Event{}, false, nil
	}
	if cur {
		f.matched[k] = ev.Object
		delete(f.unmatched, k)
	} else {
		delete(f.matched, k)
		f.unmatched[k] = true
	}
	switch {
	case ev.Type == watch.Added:
		return ev, cur, nil
	case cur && (wasMatched || !known):
		return watch.Event{Type: watch.Modified, Object: ev.Object}, true, nil
	case cur:
		return watch.Event{Type: watch.Added, Object: ev.Object}, true, nil
	case wasMatched:
		// The last state that matched, at the RV of the change.
		last := prev.DeepCopyObject()
		rv, err := meta.Accessor(ev.Object)
		if err != nil {
			return watch.Event{}, false, err
		}
		la, err := meta.Accessor(last)
		if err != nil {
			return watch.Event{}, false, err
		}
		la.SetResourceVersion(rv.GetResourceVersion())
		return watch.Event{Type: watch.Deleted, Object: last}, true, nil
	case !known:
		return watch.Event{Type: watch.Deleted, Object: ev.Object}, true, nil
	}
	return watch.Event{}, false, nil
}
