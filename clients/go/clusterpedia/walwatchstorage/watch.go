package walwatchstorage

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	internal "github.com/clusterpedia-io/api/clusterpedia"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// Watch watches the resource through walwatch. Every RV a list of this
// storage gave continues exactly; resourceVersion unset or 0, and WatchList
// (sendInitialEvents), start from walwatch's own snapshot of the table.
//
// Clusterpedia's query options are served exactly, or refused with a 400:
//   - one cluster or one namespace: walwatch's path; one name: its
//     fieldSelector; several clusters, namespaces or names, since and
//     before: filtered here (none of them ever changes on an object, so an
//     event either always or never matches);
//   - labelSelector: walwatch's, which sends an object entering or leaving
//     the selection as ADDED or DELETED as the apiserver does; fieldSelector
//     on metadata.name and metadata.namespace likewise;
//   - owner, a fuzzy name, other fields, raw SQL and injected events depend
//     on other rows or on the `events` column: refused;
//   - orderby means nothing on a watch and is ignored.
//
// An error (a 400 here, or walwatch's answer: 504 while it catches up, 429,
// 503) is returned, and so is a watch.Interface whose only event is that
// error as a watch.Error: Clusterpedia's RESTStorage.Watch
// (pkg/kubeapiserver/resourcerest) drops the error of this method and serves
// the watch.Interface instead, so that is how the client gets the Status.
// walwatch's 410 Expired comes, as the apiserver's does, as the stream's
// ERROR event.
func (s *ResourceStorage) Watch(ctx context.Context, opts *internal.ListOptions) (watch.Interface, error) {
	w, err := s.watch(ctx, opts)
	if err != nil {
		return errorWatch(err), err
	}
	return w, nil
}

func (s *ResourceStorage) watch(ctx context.Context, opts *internal.ListOptions) (watch.Interface, error) {
	q, err := newQuery(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case q.ownerUID != "" || q.ownerName != "":
		return nil, badRequest("a watch cannot select by owner: an object's owner is another row, and the owner_uid of an object can change")
	case len(q.fuzzyNames) > 0:
		return nil, badRequest("a watch cannot select by fuzzy name (%s)", fuzzyNameLabel)
	case q.inject:
		return nil, badRequest("a watch cannot inject events (search.clusterpedia.io/inject-events): they are not part of the watched object")
	}
	serverFields, localFields, err := q.watchFields()
	if err != nil {
		return nil, err
	}

	req := walwatch.WatchRequest{Resource: s.config.StorageResource, Decoder: s.config.Codec}
	f := &eventFilter{since: q.since, before: q.before}
	if len(q.clusters) == 1 {
		req.Cluster = q.clusters[0]
	} else if len(q.clusters) > 1 {
		f.sets = append(f.sets, valueSet{of: clusterOf, in: true, values: sets.New(q.clusters...)})
	}
	if len(q.namespaces) == 1 {
		req.Namespace = q.namespaces[0]
	} else if len(q.namespaces) > 1 {
		f.sets = append(f.sets, valueSet{of: namespaceOf, in: true, values: sets.New(q.namespaces...)})
	}
	if len(q.names) == 1 {
		serverFields = append(serverFields, "metadata.name="+fields.EscapeValue(q.names[0]))
	} else if len(q.names) > 1 {
		f.sets = append(f.sets, valueSet{of: nameOf, in: true, values: sets.New(q.names...)})
	}
	for _, r := range localFields {
		of := nameOf
		if r.path[1] == "namespace" {
			of = namespaceOf
		}
		f.sets = append(f.sets, valueSet{of: of, in: r.op == selection.In, values: sets.New(r.values...)})
	}

	req.Options = metav1.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		AllowWatchBookmarks:  opts.AllowWatchBookmarks,
		SendInitialEvents:    opts.SendInitialEvents,
		TimeoutSeconds:       opts.TimeoutSeconds,
		FieldSelector:        strings.Join(serverFields, ","),
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
		req.Options.LabelSelector = opts.LabelSelector.String()
	}
	w, err := s.factory.client.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	if f.empty() {
		return w, nil
	}
	return watch.Filter(w, f.keep), nil
}

// eventFilter keeps the events of objects the watch's query selects beyond
// what walwatch selected. Each property it reads is fixed for the life of an
// object (a change of name, namespace or cluster is a new object: DELETED
// then ADDED), so an object's events are all kept or all dropped, and no
// ADDED or DELETED is needed for an object entering or leaving.
type eventFilter struct {
	sets          []valueSet // all must hold
	since, before *time.Time
}

// valueSet holds when a property of the object is (in) or is not among
// values; made once per watch.
type valueSet struct {
	of     func(metav1.Object) string
	in     bool
	values sets.Set[string]
}

func clusterOf(m metav1.Object) string   { return m.GetAnnotations()[clusterAnnotation] }
func namespaceOf(m metav1.Object) string { return m.GetNamespace() }
func nameOf(m metav1.Object) string      { return m.GetName() }

func (f *eventFilter) empty() bool {
	return len(f.sets) == 0 && f.since == nil && f.before == nil
}

// keep passes bookmarks and errors, and the events of selected objects.
func (f *eventFilter) keep(e watch.Event) (watch.Event, bool) {
	if e.Type == watch.Bookmark || e.Type == watch.Error {
		return e, true
	}
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return e, true // not an object: let the consumer see it
	}
	for _, s := range f.sets {
		if s.values.Has(s.of(m)) != s.in {
			return e, false
		}
	}
	if f.since != nil || f.before != nil {
		created := m.GetCreationTimestamp().Time
		if f.since != nil && created.Before(*f.since) {
			return e, false
		}
		if f.before != nil && !created.Before(*f.before) {
			return e, false
		}
	}
	return e, true
}

// errorWatch is a watch whose only event is err as a watch.Error.
func errorWatch(err error) watch.Interface {
	status := errorStatus(err)
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: status}
	close(ch)
	return &closedWatch{ch: ch}
}

type closedWatch struct{ ch chan watch.Event }

func (w *closedWatch) Stop()                          {}
func (w *closedWatch) ResultChan() <-chan watch.Event { return w.ch }

// errorStatus is err's Status (a StatusError's own, else a 500).
func errorStatus(err error) runtime.Object {
	if s, ok := err.(interface{ Status() metav1.Status }); ok {
		status := s.Status()
		return &status
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: err.Error(),
	}
}
