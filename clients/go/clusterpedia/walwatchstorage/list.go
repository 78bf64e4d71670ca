package walwatchstorage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"time"

	"gorm.io/gorm"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	genericstorage "k8s.io/apiserver/pkg/storage"

	internal "github.com/clusterpedia-io/api/clusterpedia"

	"github.com/walwatch/walwatch/clients/go/walwatchgorm"
)

// MemberResourceVersionAnnotation keeps an item's member-cluster
// resourceVersion, as walwatch's watch events do: the item's own
// metadata.resourceVersion is the list's walwatch RV.
const MemberResourceVersionAnnotation = "walwatch.clusterpedia.io/member-resource-version"

// eventsAnnotation is Clusterpedia's annotation for an object's events
// (internal.ShadowAnnotationEvents, from api v0.9).
const eventsAnnotation = "shadow.clusterpedia.io/events"

var errMalformedToken = errors.New("malformed")

// maxNewerSnapshots bounds the snapshots a list with resourceVersion N takes
// before it answers that N is too large.
const maxNewerSnapshots = 5

// List reads the rows opts selects into listObject, in one snapshot, and
// sets the list's resourceVersion to the snapshot's exact RV: a watch from
// it continues the list exactly. Its items carry that RV too, their
// member-cluster RV in MemberResourceVersionAnnotation.
//
// Pages (limit, continue) come from one snapshot, held between pages for
// walwatch.heldListIdle; a continue whose snapshot is no longer held (idle
// too long, or asked of another APIServer replica) is 410 Expired, and
// client-go's pager then lists again without pages. A numeric continue is
// Clusterpedia's offset (search.clusterpedia.io/offset), read from a new
// snapshot. With resourceVersion N (and resourceVersionMatch NotOlderThan or
// unset) the list is at N or newer; Exact N is served only if N is the
// newest snapshot's RV (the table's history is not kept), else 410 Expired.
func (s *ResourceStorage) List(ctx context.Context, listObject runtime.Object, opts *internal.ListOptions) error {
	q, err := newQuery(opts)
	if err != nil {
		return err
	}
	if opts.Continue != "" {
		if offset, err := strconv.ParseInt(opts.Continue, 10, 64); err == nil {
			if offset < 0 {
				return badRequest("offset %d: must not be negative", offset)
			}
			return s.listNew(ctx, listObject, opts, q, offset)
		}
		return s.listContinue(ctx, listObject, opts, q)
	}
	return s.listNew(ctx, listObject, opts, q, 0)
}

func (s *ResourceStorage) listNew(ctx context.Context, listObject runtime.Object, opts *internal.ListOptions, q *query, offset int64) error {
	snapshot, listRV, err := s.snapshotFor(ctx, opts)
	if err != nil {
		return err
	}
	held := false
	defer func() {
		if !held {
			snapshot.Close()
		}
	}()
	page, err := s.readPage(ctx, snapshot, q, listObject, offset, opts.Limit)
	if err != nil {
		return err
	}
	if page.more {
		l := &heldList{id: newListID(), key: q.key(s.config.StorageResource), snapshot: snapshot, q: q}
		if held = s.factory.lists.add(l); held {
			page.next = continueToken{ID: l.id, Offset: offset + opts.Limit, ResourceVersion: listRV}.encode()
		} else {
			// Every held slot is taken: answer the rest of the list now,
			// from the same snapshot, as a server that cannot page does.
			if page, err = s.readPage(ctx, snapshot, q, listObject, offset, 0); err != nil {
				return err
			}
		}
	}
	return s.finishList(listObject, page, listRV)
}

func (s *ResourceStorage) listContinue(ctx context.Context, listObject runtime.Object, opts *internal.ListOptions, q *query) error {
	token, err := decodeContinue(opts.Continue)
	if err != nil {
		return badRequest("continue %q: not a continue token of this storage", opts.Continue)
	}
	l := s.factory.lists.take(token.ID)
	if l == nil {
		return apierrors.NewResourceExpired(fmt.Sprintf(
			"the snapshot of the list at resourceVersion %s is no longer held (it was idle for %s, or the list began on another APIServer replica); list again without continue",
			token.ResourceVersion, s.factory.config.Walwatch.HeldListIdle.Duration))
	}
	if l.key != q.key(s.config.StorageResource) {
		s.factory.lists.put(l)
		return badRequest("continue: the token is of a list of other options or another resource")
	}
	page, err := s.readPage(ctx, l.snapshot, l.q, listObject, token.Offset, opts.Limit)
	if err != nil {
		l.snapshot.Close()
		return err
	}
	if page.more {
		page.next = continueToken{ID: l.id, Offset: token.Offset + opts.Limit, ResourceVersion: token.ResourceVersion}.encode()
		s.factory.lists.put(l)
	} else {
		l.snapshot.Close()
	}
	return s.finishList(listObject, page, token.ResourceVersion)
}

// snapshotFor takes a snapshot that satisfies opts' resourceVersion, and
// gives the list's RV: the snapshot's, or the asked one when the snapshot
// shows the table's state at it too (walwatch.Snapshot.Shows).
func (s *ResourceStorage) snapshotFor(ctx context.Context, opts *internal.ListOptions) (*walwatchgorm.Snapshot, string, error) {
	var want uint64
	if rv := opts.ResourceVersion; rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, "", badRequest("resourceVersion %q: not a walwatch resourceVersion (a decimal number)", rv)
		}
		want = n
	}
	exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact
	switch opts.ResourceVersionMatch {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
	default:
		return nil, "", badRequest("resourceVersionMatch %q: not supported", opts.ResourceVersionMatch)
	}
	for attempt := 1; ; attempt++ {
		// walwatch answers a handoff it cannot make yet within its
		// --too-large-rv-wait, and the client asks again a few times; a
		// walwatch that cannot reach its database may take a minute per
		// answer. The whole is bounded well inside the apiserver's request
		// timeout (60 s).
		hctx, cancel := context.WithTimeout(ctx, s.factory.config.Walwatch.HandoffTimeout.Duration)
		snapshot, err := walwatchgorm.BeginSnapshot(hctx, s.factory.client, s.factory.db)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if want > 0 {
					return nil, "", genericstorage.NewTooLargeResourceVersionError(want, 0, 1)
				}
				return nil, "", apierrors.NewTimeoutError(fmt.Sprintf(
					"walwatch did not hand off a snapshot of %s within %s (walwatch.handoffTimeout); retry",
					s.groupResource(), s.factory.config.Walwatch.HandoffTimeout.Duration), 1)
			}
			return nil, "", s.snapshotError(err)
		}
		got, err := strconv.ParseUint(snapshot.ResourceVersion(), 10, 64)
		if err != nil {
			snapshot.Close()
			return nil, "", apierrors.NewInternalError(err)
		}
		switch {
		case want == 0 || (!exact && got >= want):
			return snapshot, snapshot.ResourceVersion(), nil
		case snapshot.Shows(want):
			return snapshot, strconv.FormatUint(want, 10), nil
		case exact && got > want:
			snapshot.Close()
			return nil, "", apierrors.NewResourceExpired(fmt.Sprintf(
				"too old resource version: %d (%d): the walwatch storage lists the table as it is now only", want, got))
		}
		snapshot.Close()
		if attempt == maxNewerSnapshots {
			// The apiserver's answer to an RV it has not reached: 504 with
			// cause ResourceVersionTooLarge; client-go retries it.
			return nil, "", genericstorage.NewTooLargeResourceVersionError(want, got, 1)
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// snapshotError passes walwatch's answers on as the Statuses they are, but
// turns a handoff that kept failing (409, 410 after every snapshot) into a
// 504 the client retries: the list's own RV was never too old.
func (s *ResourceStorage) snapshotError(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return apierrors.NewTimeoutError(fmt.Sprintf("walwatch could not hand off a snapshot of %s: %v; retry", s.groupResource(), err), 1)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if status.Status().Code == 500 {
			// walwatch could not read the database; this APIServer could,
			// but cannot give an exact RV without walwatch: unavailable,
			// for a while.
			return apierrors.NewServiceUnavailable(fmt.Sprintf("walwatch cannot hand off a snapshot of %s: %v", s.groupResource(), err))
		}
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("listing %s: %w", s.groupResource(), err))
}

// page is what one read of a snapshot gave.
type page struct {
	items     []runtime.Object
	more      bool   // rows follow the page
	next      string // the continue token, once held
	remaining *int64
}

// readPage reads up to limit rows (0: all) from offset, decoded for
// listObject's items.
func (s *ResourceStorage) readPage(ctx context.Context, snapshot *walwatchgorm.Snapshot, q *query, listObject runtime.Object, offset, limit int64) (*page, error) {
	db := snapshot.DB(ctx).Table(s.factory.config.Walwatch.Table)
	db = where(db, s.factory.dialect, s.factory.config.Walwatch.Table, s.config.StorageResource, q)
	p := &page{}
	if q.withRemain {
		var total int64
		if err := db.Session(&gorm.Session{}).Count(&total).Error; err != nil {
			return nil, s.dbError(err)
		}
		p.remaining = &total
	}
	columns := "object"
	if q.inject {
		columns = "object, events"
	}
	read := order(db.Session(&gorm.Session{}).Select(columns), s.factory.dialect, q)
	if offset > 0 {
		read = read.Offset(int(offset))
	}
	if limit > 0 {
		read = read.Limit(int(limit) + 1) // one more: are there more?
	}
	rows, err := read.Rows()
	if err != nil {
		return nil, s.dbError(err)
	}
	defer rows.Close()
	item := itemFactory(listObject)
	for rows.Next() {
		var object, events []byte
		dest := []any{&object}
		if q.inject {
			dest = append(dest, &events)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, s.dbError(err)
		}
		if limit > 0 && int64(len(p.items)) == limit {
			p.more = true
			break
		}
		obj, err := s.decodeItem(object, events, q, item())
		if err != nil {
			return nil, err
		}
		p.items = append(p.items, obj)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError(err)
	}
	if p.remaining != nil {
		r := *p.remaining - offset - int64(len(p.items))
		p.remaining = &r
	}
	return p, nil
}

// itemFactory makes an empty item of listObject's kind.
func itemFactory(listObject runtime.Object) func() runtime.Object {
	if _, ok := listObject.(*unstructured.UnstructuredList); ok {
		return func() runtime.Object { return &unstructured.Unstructured{} }
	}
	itemsPtr, err := meta.GetItemsPtr(listObject)
	if err != nil {
		return func() runtime.Object { return nil }
	}
	v, err := conversion.EnforcePtr(itemsPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return func() runtime.Object { return nil }
	}
	elem := v.Type().Elem()
	return func() runtime.Object {
		obj, _ := reflect.New(elem).Interface().(runtime.Object)
		return obj
	}
}

// decodeItem decodes one row's object with the resource's codec, as
// internalstorage does, and gives it the list's view of the row.
func (s *ResourceStorage) decodeItem(object, events []byte, q *query, into runtime.Object) (runtime.Object, error) {
	if into == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("list of %s: cannot make its items", s.groupResource()))
	}
	if q.onlyMeta {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(object, &fields); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("a stored %s is not a JSON object: %w", s.groupResource(), err))
		}
		object, _ = json.Marshal(map[string]json.RawMessage{
			"apiVersion": fields["apiVersion"], "kind": fields["kind"], "metadata": fields["metadata"],
		})
	}
	obj, _, err := s.config.Codec.Decode(object, nil, into)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decoding a stored %s: %w", s.groupResource(), err))
	}
	if q.inject && len(events) > 0 && string(events) != "null" {
		if err := injectEventsAnnotation(obj, events); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return obj, nil
}

// injectEventsAnnotation sets Clusterpedia's events annotation from the
// `events` column (an object of event uid to event): the events as a JSON
// array, ordered by uid.
func injectEventsAnnotation(obj runtime.Object, column []byte) error {
	var byUID map[string]json.RawMessage
	if err := json.Unmarshal(column, &byUID); err != nil {
		return fmt.Errorf("the events column is not a JSON object: %w", err)
	}
	uids := make([]string, 0, len(byUID))
	for uid := range byUID {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	events := make([]json.RawMessage, 0, len(uids))
	for _, uid := range uids {
		events = append(events, byUID[uid])
	}
	data, err := json.Marshal(events)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	annotations := m.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[eventsAnnotation] = string(data)
	m.SetAnnotations(annotations)
	return nil
}

// finishList fills listObject: items stamped with rv, the list's RV, its
// continue and remaining count.
func (s *ResourceStorage) finishList(listObject runtime.Object, p *page, rv string) error {
	for _, obj := range p.items {
		m, err := meta.Accessor(obj)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		annotations := m.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[MemberResourceVersionAnnotation] = m.GetResourceVersion()
		m.SetAnnotations(annotations)
		m.SetResourceVersion(rv)
	}
	if err := meta.SetList(listObject, p.items); err != nil {
		return apierrors.NewInternalError(err)
	}
	list, err := meta.ListAccessor(listObject)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	list.SetResourceVersion(rv)
	list.SetContinue(p.next)
	if p.remaining != nil && (p.next != "" || *p.remaining > 0) {
		list.SetRemainingItemCount(p.remaining)
	} else {
		list.SetRemainingItemCount(nil)
	}
	return nil
}
