package apistorage

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// etcd3's messages (k8s.io/apiserver/pkg/storage/etcd3/errors.go), so that
// clients see what they would see from etcd.
const (
	expiredList          = "The resourceVersion for the provided list is too old."
	inconsistentContinue = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
)

// listedRow is a row of a list, with its key.
type listedRow struct {
	key       string
	objectKey objectKey
	row
}

// readScope reads every row of sc in q, in key order (as etcd lists).
func (s *Store) readScope(ctx context.Context, q walwatch.Queryer, sc scope) ([]listedRow, error) {
	query, args := s.scoped(s.q.list, sc)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storage.NewInternalError(fmt.Errorf("listing: %w", err))
	}
	defer rows.Close()
	var out []listedRow
	for rows.Next() {
		var ns, name string
		var r listedRow
		if err := rows.Scan(&ns, &name, &r.columnRV, &r.object); err != nil {
			return nil, storage.NewInternalError(fmt.Errorf("listing: %w", err))
		}
		r.objectKey = objectKey{ns, name}
		r.key = s.keyString(r.objectKey)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, storage.NewInternalError(fmt.Errorf("listing: %w", err))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// listPrefix is the key prefix of a list, as etcd3 forms it: a recursive
// list's key ends in "/".
func listPrefix(key string, recursive bool) string {
	if recursive && (len(key) == 0 || key[len(key)-1] != '/') {
		return key + "/"
	}
	return key
}

func (s *Store) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	sc, err := s.parseKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	keyPrefix := listPrefix(path.Clean("/"+key), opts.Recursive)
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	minRV, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	pred := opts.Predicate
	var continueKey string
	var continueRV int64
	if opts.Recursive && pred.Continue != "" {
		continueKey, continueRV, err = storage.DecodeContinue(pred.Continue, keyPrefix)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
	}

	// The RV the list must show, as etcd3 resolves it (resolveGetListRev):
	// a continue's; an exact one; and, for a paged list with an RV and no
	// match (the legacy form), that RV. Otherwise the snapshot's.
	var exact uint64
	switch {
	case continueKey != "":
		if continueRV > 0 {
			exact = uint64(continueRV)
		}
	case opts.ResourceVersion == "":
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan:
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		exact = minRV
	case opts.ResourceVersionMatch == "":
		if opts.Recursive && pred.Limit > 0 && minRV > 0 {
			exact = minRV
		}
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("unknown ResourceVersionMatch value: %v", opts.ResourceVersionMatch))
	}
	q, listRV, finish, err := s.listSnapshot(ctx, sc, exact, minRV)
	if err != nil {
		if exact != 0 && continueRV > 0 && apierrors.IsResourceExpired(err) {
			token, terr := storage.EncodeContinue(continueKey, keyPrefix, -1)
			if terr == nil {
				e := apierrors.NewResourceExpired(inconsistentContinue)
				e.ErrStatus.ListMeta.Continue = token
				return e
			}
		}
		return err
	}
	read := false
	defer func() { finish(read) }()

	rows, err := s.readScope(ctx, q, sc)
	if err != nil {
		return err
	}
	newItem := func() runtime.Object { return reflect.New(v.Type().Elem()).Interface().(runtime.Object) }
	paging := pred.Limit > 0
	var lastKey string
	hasMore := false
	count := int64(0) // rows from continueKey on, matching or not
	for _, r := range rows {
		if r.key < continueKey {
			continue
		}
		count++
		if hasMore {
			continue
		}
		if paging && int64(v.Len()) >= pred.Limit {
			hasMore = true
			continue
		}
		lastKey = r.key
		rv, err := s.resolve(ctx, r.objectKey, r.columnRV)
		if err != nil {
			return err
		}
		obj := newItem()
		if err := s.decode(r.object, obj, rv); err != nil {
			return err
		}
		if matched, err := pred.Matches(obj); err == nil && matched {
			v.Set(reflect.Append(v, reflect.ValueOf(obj).Elem()))
		}
	}
	read = true
	if v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	token, remaining, err := storage.PrepareContinueToken(lastKey, keyPrefix, int64(listRV), count, hasMore, opts)
	if err != nil {
		return err
	}
	return s.versioner.UpdateList(listObj, listRV, token, remaining)
}

// listSnapshot is where a list reads, and the RV it shows; finish(read)
// ends the list's use of it (a snapshot read whole is held for later lists
// at its RV). With an exact RV: a held snapshot at it, else a new one if
// nothing of sc changed since (410 Expired otherwise, as from a compacted
// etcd); without: a new snapshot, at least as new as minRV.
func (s *Store) listSnapshot(ctx context.Context, sc scope, exact, minRV uint64) (walwatch.Queryer, uint64, func(read bool), error) {
	if exact != 0 {
		if h := s.held.acquire(exact); h != nil {
			return h.snap.Queryer(), exact, func(bool) { s.held.release(h) }, nil
		}
	}
	snap, err := s.beginSnapshot(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	at, err := strconv.ParseUint(snap.ResourceVersion(), 10, 64)
	if err != nil {
		snap.Close()
		return nil, 0, nil, storage.NewInternalError(err)
	}
	finish := func(read bool) { s.finishSnapshot(snap, at, read) }
	switch {
	case exact == 0 || exact > at:
		// Not older than minRV, or at exact: the snapshot's RV, or the
		// asked one when the snapshot shows its state too.
		want := max(exact, minRV)
		listRV, err := notOlder(snap, want)
		if err == nil && exact != 0 && listRV != exact {
			err = storage.NewTooLargeResourceVersionError(exact, at, 0)
		}
		if err != nil {
			snap.Close()
			return nil, 0, nil, err
		}
		return snap.Queryer(), listRV, finish, nil
	case exact != at:
		same, err := s.unchangedBetween(ctx, sc, exact, at)
		if err == nil && !same {
			err = apierrors.NewResourceExpired(expiredList)
		}
		if err != nil {
			snap.Close()
			return nil, 0, nil, err
		}
		// The snapshot shows exact's state, but is held at its own RV.
		return snap.Queryer(), exact, finish, nil
	}
	return snap.Queryer(), at, finish, nil
}

// finishSnapshot holds a new snapshot a list has read whole, or closes it.
func (s *Store) finishSnapshot(snap *walwatch.Snapshot, at uint64, read bool) {
	if read {
		s.held.add(snap, at)
	} else {
		snap.Close()
	}
}

// unchangedBetween tells whether no object of sc changed in (from, to]: then
// the state at to, which a snapshot reads, is also the state at from. It
// asks walwatch for the events after from, ending the stream after a
// second: an event at or below to means a change; a bookmark at or above to
// without one means none. A from older than walwatch retains is a change.
func (s *Store) unchangedBetween(ctx context.Context, sc scope, from, to uint64) (bool, error) {
	req := s.watchRequest(sc)
	req.Options.ResourceVersion = strconv.FormatUint(from, 10)
	req.Options.AllowWatchBookmarks = true
	one := int64(1)
	req.Options.TimeoutSeconds = &one
	w, err := s.cfg.Client.Watch(ctx, req)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return false, nil
		case watch.Bookmark:
			if rv, err := s.versioner.ObjectResourceVersion(ev.Object); err == nil && rv >= to {
				return true, nil
			}
		default:
			rv, err := s.versioner.ObjectResourceVersion(ev.Object)
			if err != nil || rv <= to {
				if sc.single == nil || matchesKey(ev.Object, *sc.single) {
					return false, nil
				}
				continue
			}
			return true, nil
		}
	}
	return false, ctx.Err()
}

func matchesKey(obj runtime.Object, k objectKey) bool {
	a, err := meta.Accessor(obj)
	return err == nil && a.GetNamespace() == k.namespace && a.GetName() == k.name
}
