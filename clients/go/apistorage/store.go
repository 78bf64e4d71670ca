package apistorage

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// Config is what a Store needs.
type Config struct {
	// Client reaches the walwatch that watches DB's table.
	Client *walwatch.Client
	// DB is the database, Dialect its kind.
	DB      *sql.DB
	Dialect walwatch.Dialect
	// Table is the table; empty means "resources". It must be the table
	// walwatch watches (and Client's Config.Table).
	Table string

	// Codec encodes the objects stored in the `object` column and decodes
	// them and walwatch's events; NewFunc and NewListFunc make the
	// resource's objects and lists.
	Codec       runtime.Codec
	NewFunc     func() runtime.Object
	NewListFunc func() runtime.Object

	// Resource and Kind fill the rows' group, version, resource and kind
	// columns; Cluster their cluster column (one server's objects are one
	// "cluster" of the table). Cluster must not be empty.
	Resource schema.GroupVersionResource
	Kind     string
	Cluster  string
	// ResourcePrefix is the first segment of every key, e.g. "/pods": keys
	// are <prefix>/<namespace>/<name> and, cluster-scoped, <prefix>/<name>.
	ResourcePrefix string

	// HeldSnapshots is how many snapshots of recent lists the store keeps,
	// each for HeldSnapshotIdle after its last use, so that the next page of
	// a paged list, or a list at an exact RV, reads that RV's state. Each
	// holds a database connection (and on PostgreSQL holds back VACUUM).
	// Zero means 4 and 10 s; a negative HeldSnapshots, none. On PostgreSQL
	// an open snapshot also holds back walwatch's handoffs for a while after
	// a walwatch starts (410 while a transaction older than its log is
	// open), so they are held briefly.
	HeldSnapshots    int
	HeldSnapshotIdle time.Duration
}

// Store is the storage.Interface. Close it to end its stream.
type Store struct {
	cfg       Config
	versioner storage.APIObjectVersioner
	prefix    string // ResourcePrefix without its slashes
	q         queries
	tail      *tail
	held      *heldSnapshots
	cancel    context.CancelFunc
	done      chan struct{}

	// pending are the RVs of this store's writes not yet recorded in their
	// rows: the next write records them in its own transaction, so that
	// recording adds no transaction (and no RV) of its own.
	pendMu  sync.Mutex
	pending map[objectKey]pendingRV
}

// pendingRV is a write whose row still holds its write id.
type pendingRV struct {
	key     objectKey
	writeID string
	rv      uint64
}

var _ storage.Interface = (*Store)(nil)

// New checks cfg, opens the store's stream from walwatch's current RV and
// returns the store. ctx bounds the start only.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Client == nil || cfg.DB == nil || cfg.Codec == nil || cfg.NewFunc == nil || cfg.NewListFunc == nil {
		return nil, errors.New("apistorage: Client, DB, Codec, NewFunc and NewListFunc are required")
	}
	if cfg.Dialect != walwatch.Postgres && cfg.Dialect != walwatch.MySQL {
		return nil, fmt.Errorf("apistorage: dialect %q: want %q or %q", cfg.Dialect, walwatch.Postgres, walwatch.MySQL)
	}
	if cfg.Resource.Version == "" || cfg.Resource.Resource == "" || cfg.Kind == "" || cfg.Cluster == "" {
		return nil, errors.New("apistorage: Resource (version and resource), Kind and Cluster are required")
	}
	prefix := strings.Trim(cfg.ResourcePrefix, "/")
	if prefix == "" || strings.Contains(prefix, "/") {
		return nil, fmt.Errorf("apistorage: ResourcePrefix %q: want one segment, like \"/pods\"", cfg.ResourcePrefix)
	}
	if cfg.Table == "" {
		cfg.Table = "resources"
	}
	if cfg.HeldSnapshots == 0 {
		cfg.HeldSnapshots = 4
	}
	if cfg.HeldSnapshotIdle <= 0 {
		cfg.HeldSnapshotIdle = 10 * time.Second
	}
	rv, err := cfg.Client.FreshRV(ctx)
	if err != nil {
		return nil, fmt.Errorf("apistorage: walwatch's current RV: %w", err)
	}
	from, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("apistorage: walwatch's current RV %q: %w", rv, err)
	}
	s := &Store{
		cfg:     cfg,
		prefix:  prefix,
		q:       newQueries(cfg.Dialect, cfg.Table),
		done:    make(chan struct{}),
		pending: map[objectKey]pendingRV{},
		held:    &heldSnapshots{max: cfg.HeldSnapshots, idle: cfg.HeldSnapshotIdle},
	}
	s.tail = newTail(cfg.Client, walwatch.WatchRequest{Resource: cfg.Resource, Cluster: cfg.Cluster}, from)
	tctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.tail.run(tctx)
	}()
	return s, nil
}

// Close records the RVs of the store's last writes in their rows, lets go
// of its held snapshots, and ends the store's stream. Watches opened
// earlier end on their own contexts.
func (s *Store) Close() {
	s.held.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.write(ctx, objectKey{}, ""); err != nil {
		klog.ErrorS(err, "apistorage: recording the RVs of the last writes; readers will resolve them again")
	}
	s.cancel()
	<-s.done
}

// write runs query (none if "") in a transaction that first records the
// pending RVs of writes to other objects than k (of every object, without
// a query). A write to k replaces k's write id, so k's pending RV is
// dropped once query commits. The pending RVs a transaction records are
// its own until it ends (two writers never record the same row's, which
// could deadlock them); a transaction the database aborts for a deadlock
// or a serialization failure is run again, a few times.
func (s *Store) write(ctx context.Context, k objectKey, query string, args ...any) (sql.Result, error) {
	for attempt := 1; ; attempt++ {
		fixes := s.claimPending(k, query == "")
		if len(fixes) == 0 && query == "" {
			return nil, nil
		}
		res, err := s.writeOnce(ctx, fixes, query, args)
		if err == nil {
			if query != "" {
				s.pendMu.Lock()
				delete(s.pending, k)
				s.pendMu.Unlock()
			}
			return res, nil
		}
		s.unclaimPending(fixes)
		if !isTransient(err) || attempt == maxWriteAttempts {
			return nil, err
		}
	}
}

// maxWriteAttempts bounds how often write runs a transaction the database
// aborted (a deadlock, a serialization failure).
const maxWriteAttempts = 5

func (s *Store) writeOnce(ctx context.Context, fixes []pendingRV, query string, args []any) (sql.Result, error) {
	// READ COMMITTED: a write reads nothing it did not lock, and MySQL takes
	// no gap locks at it.
	tx, err := s.cfg.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	for _, f := range fixes {
		fargs := append([]any{strconv.FormatUint(f.rv, 10)}, s.keyArgs(f.key)...)
		if _, err := tx.ExecContext(ctx, s.q.record, append(fargs, f.writeID)...); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	var res sql.Result
	if query != "" {
		if res, err = tx.ExecContext(ctx, query, args...); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

// claimPending takes the pending RVs a write to k records, in key order
// (all of them with all).
func (s *Store) claimPending(k objectKey, all bool) []pendingRV {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	fixes := make([]pendingRV, 0, len(s.pending))
	for pk, p := range s.pending {
		if pk != k || all {
			fixes = append(fixes, p)
			delete(s.pending, pk)
		}
	}
	sort.Slice(fixes, func(i, j int) bool {
		a, b := fixes[i].key, fixes[j].key
		return a.namespace < b.namespace || a.namespace == b.namespace && a.name < b.name
	})
	return fixes
}

// unclaimPending gives back the pending RVs of a transaction that did not
// commit, unless a newer write to the same object replaced one meanwhile.
func (s *Store) unclaimPending(fixes []pendingRV) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	for _, f := range fixes {
		if _, ok := s.pending[f.key]; !ok {
			s.pending[f.key] = f
		}
	}
}

func (s *Store) Versioner() storage.Versioner { return s.versioner }

// objectKey is where a key points: a namespace ("" when cluster-scoped) and
// a name.
type objectKey struct{ namespace, name string }

// scope is what a list or a watch covers: every object (all), one
// namespace, or one object.
type scope struct {
	all       bool
	namespace string     // with !all and !single: the namespace listed
	single    *objectKey // one object
}

// parseKey reads key as etcd3 prefixes it: recursive covers every key under
// key + "/", otherwise key is one object's. A key that no object of the
// store can have (outside ResourcePrefix, or of another shape) covers
// nothing: reads find nothing there, and writes fail.
func (s *Store) parseKey(key string, recursive bool) (scope, error) {
	if err := s.checkKey(key, recursive); err != nil {
		return scope{}, err
	}
	parts := strings.Split(strings.Trim(key, "/"), "/")
	if parts[0] != s.prefix {
		return nothing, nil
	}
	parts = parts[1:]
	switch {
	case recursive && len(parts) == 0:
		return scope{all: true}, nil
	case recursive && len(parts) == 1:
		return scope{namespace: parts[0]}, nil
	case !recursive && len(parts) == 1 && parts[0] != "":
		return scope{single: &objectKey{"", parts[0]}}, nil
	case !recursive && len(parts) == 2 && parts[1] != "":
		// "<prefix>//<name>" is the cluster-scoped <name>, as an object
		// with an empty namespace makes it.
		return scope{single: &objectKey{parts[0], parts[1]}}, nil
	}
	return nothing, nil
}

// nothing is the scope of a key no object can have.
var nothing = scope{single: &objectKey{"", ""}}

// objectKeyOf is the object at key, for a read.
func (s *Store) objectKeyOf(key string) (objectKey, error) {
	sc, err := s.parseKey(key, false)
	if err != nil {
		return objectKey{}, err
	}
	return *sc.single, nil
}

// writeKeyOf is the object at key, for a write: it fails on a key no object
// can have.
func (s *Store) writeKeyOf(key string) (objectKey, error) {
	k, err := s.objectKeyOf(key)
	if err != nil {
		return objectKey{}, err
	}
	if k.name == "" {
		return objectKey{}, storage.NewInternalError(fmt.Errorf("apistorage: key %q: this store keeps %s/<namespace>/<name> and %s/<name> only",
			key, s.cfg.ResourcePrefix, s.cfg.ResourcePrefix))
	}
	return k, nil
}

func (s *Store) keyString(k objectKey) string {
	if k.namespace == "" {
		return "/" + s.prefix + "/" + k.name
	}
	return "/" + s.prefix + "/" + k.namespace + "/" + k.name
}

// newWriteID is a write's id: "w" and 24 hex digits, unique.
func newWriteID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "w" + hex.EncodeToString(b[:])
}

func isWriteID(v string) bool { return strings.HasPrefix(v, "w") && len(v) == 25 }

// row is one object's row: its column RV (an RV or a write id) and the
// stored object, whose metadata.resourceVersion is the write id that wrote it.
type row struct {
	columnRV string
	object   []byte
}

func (s *Store) readRow(ctx context.Context, q walwatch.Queryer, k objectKey) (*row, error) {
	var r row
	err := q.QueryRowContext(ctx, s.q.get, s.keyArgs(k)...).Scan(&r.columnRV, &r.object)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storage.NewInternalError(fmt.Errorf("reading %s: %w", s.keyString(k), err))
	}
	return &r, nil
}

func (s *Store) keyArgs(k objectKey) []any {
	r := s.cfg.Resource
	return []any{r.Group, r.Version, r.Resource, s.cfg.Cluster, k.namespace, k.name}
}

// resolveWait bounds how long a read waits for the RV of a write id that
// neither this store's writes nor its stream know: one written before this
// process started, whose writer stopped before recording it.
const resolveWait = 10 * time.Second

// resolve returns the RV a row's column stands for: the column itself, or
// the RV of the write id in it. A write id whose RV cannot be learned any
// more gets walwatch's current RV, an upper bound of its commit, recorded
// in the row.
func (s *Store) resolve(ctx context.Context, k objectKey, columnRV string) (uint64, error) {
	if !isWriteID(columnRV) {
		rv, err := strconv.ParseUint(columnRV, 10, 64)
		if err != nil {
			return 0, storage.NewInternalError(fmt.Errorf("resource_version %q is neither an RV nor a write id", columnRV))
		}
		return rv, nil
	}
	s.pendMu.Lock()
	p, ok := s.pending[k]
	s.pendMu.Unlock()
	if ok && p.writeID == columnRV {
		return p.rv, nil
	}
	wctx, cancel := context.WithTimeout(ctx, resolveWait)
	rv, err := s.tail.wait(wctx, tailKey{writeID: columnRV})
	cancel()
	if err == nil {
		return rv, nil
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if rv, err = s.freshRV(ctx); err != nil {
		return 0, err
	}
	klog.InfoS("apistorage: a write's RV is unknown; recording walwatch's current RV, an upper bound", "key", s.keyString(k), "writeID", columnRV, "rv", rv)
	args := append([]any{strconv.FormatUint(rv, 10)}, s.keyArgs(k)...)
	if _, err := s.cfg.DB.ExecContext(ctx, s.q.record, append(args, columnRV)...); err != nil {
		return 0, storage.NewInternalError(err)
	}
	return rv, nil
}

// snapshotRetryBound bounds how long a read retries a snapshot that
// walwatch cannot hand off yet: 410 while a transaction older than its log
// is open anywhere on the server (for a while after walwatch starts), 409,
// 504 while it catches up. Within the caller's context.
const snapshotRetryBound = 30 * time.Second

// beginSnapshot is Client.BeginSnapshot, retried with a growing pause while
// walwatch answers 409, 410 or 504: conditions that pass.
func (s *Store) beginSnapshot(ctx context.Context) (*walwatch.Snapshot, error) {
	deadline := time.Now().Add(snapshotRetryBound)
	pause := 50 * time.Millisecond
	for {
		snap, err := s.cfg.Client.BeginSnapshot(ctx, s.cfg.DB, s.cfg.Dialect)
		if err == nil {
			return snap, nil
		}
		transient := apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsConflict(err) || apierrors.IsTimeout(err)
		if !transient || time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

func (s *Store) freshRV(ctx context.Context) (uint64, error) {
	v, err := s.cfg.Client.FreshRV(ctx)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(v, 10, 64)
}

// decode decodes a stored object into out, with resourceVersion rv.
func (s *Store) decode(data []byte, out runtime.Object, rv uint64) error {
	if _, _, err := s.cfg.Codec.Decode(data, nil, out); err != nil {
		return storage.NewInternalError(fmt.Errorf("decoding a stored object: %w", err))
	}
	return s.versioner.UpdateObject(out, rv)
}

// encode is obj as stored: a copy whose resourceVersion is writeID.
func (s *Store) encode(obj runtime.Object, writeID string) ([]byte, error) {
	c := obj.DeepCopyObject()
	if err := s.versioner.PrepareObjectForStorage(c); err != nil {
		return nil, err
	}
	a, err := meta.Accessor(c)
	if err != nil {
		return nil, err
	}
	a.SetResourceVersion(writeID)
	return runtime.Encode(s.cfg.Codec, c)
}

// commitWrite waits for the RV of the write writeID made (of its deletion,
// with deleted); the next write records it in the row. The write has
// committed: an error here leaves it in place.
func (s *Store) commitWrite(ctx context.Context, k objectKey, writeID string, deleted bool) (uint64, error) {
	rv, err := s.tail.wait(ctx, tailKey{writeID: writeID, deleted: deleted})
	if errors.Is(err, errTailGap) {
		// An upper bound: walwatch is at or past the commit.
		rv, err = s.freshRV(ctx)
	}
	if err != nil {
		return 0, storage.NewInternalError(fmt.Errorf("the write of %s committed, but its RV is unknown: %w", s.keyString(k), err))
	}
	s.pendMu.Lock()
	if deleted {
		delete(s.pending, k)
	} else {
		s.pending[k] = pendingRV{key: k, writeID: writeID, rv: rv}
	}
	s.pendMu.Unlock()
	return rv, nil
}

func (s *Store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	k, err := s.writeKeyOf(key)
	if err != nil {
		return err
	}
	if v, err := s.versioner.ObjectResourceVersion(obj); err == nil && v != 0 {
		return storage.ErrResourceVersionSetOnCreate
	}
	if ttl != 0 {
		return storage.NewInternalError(errors.New("apistorage: objects with a TTL are not supported"))
	}
	writeID := newWriteID()
	data, err := s.encode(obj, writeID)
	if err != nil {
		return err
	}
	uid := ""
	if a, err := meta.Accessor(obj); err == nil {
		uid = string(a.GetUID())
	}
	now := time.Now().UTC()
	args := append(s.keyArgs(k), s.cfg.Kind, uid, writeID, string(data), now, now)
	if _, err := s.write(ctx, k, s.q.insert, args...); err != nil {
		if isUniqueViolation(err) {
			return storage.NewKeyExistsError(key, 0)
		}
		return storage.NewInternalError(fmt.Errorf("creating %s: %w", key, err))
	}
	rv, err := s.commitWrite(ctx, k, writeID, false)
	if err != nil {
		return err
	}
	if out != nil {
		return s.decode(data, out, rv)
	}
	return nil
}

func (s *Store) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	k, err := s.objectKeyOf(key)
	if err != nil {
		return err
	}
	minRV, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return err
	}
	var r *row
	if minRV > 0 {
		// Read at an RV that can be compared with minRV.
		snap, err := s.beginSnapshot(ctx)
		if err != nil {
			return err
		}
		defer snap.Close()
		if _, err := notOlder(snap, minRV); err != nil {
			return err
		}
		if r, err = s.readRow(ctx, snap.Queryer(), k); err != nil {
			return err
		}
	} else if r, err = s.readRow(ctx, s.cfg.DB, k); err != nil {
		return err
	}
	if r == nil {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return storage.NewKeyNotFoundError(key, 0)
	}
	rv, err := s.resolve(ctx, k, r.columnRV)
	if err != nil {
		return err
	}
	return s.decode(r.object, out, rv)
}

// notOlder is the RV of a read in snap that must not be older than minRV:
// the snapshot's, or minRV itself when the snapshot shows the state at it
// (walwatch.Snapshot.Shows); a TooLargeResourceVersion error otherwise.
func notOlder(snap *walwatch.Snapshot, minRV uint64) (uint64, error) {
	at, err := strconv.ParseUint(snap.ResourceVersion(), 10, 64)
	if err != nil {
		return 0, storage.NewInternalError(err)
	}
	switch {
	case minRV <= at:
		return at, nil
	case snap.Shows(minRV):
		return minRV, nil
	}
	return 0, storage.NewTooLargeResourceVersionError(minRV, at, 0)
}

// current reads the object at k for a conditional write: the object with
// its RV, or nil.
func (s *Store) current(ctx context.Context, k objectKey) (*row, runtime.Object, uint64, error) {
	r, err := s.readRow(ctx, s.cfg.DB, k)
	if err != nil || r == nil {
		return nil, nil, 0, err
	}
	rv, err := s.resolve(ctx, k, r.columnRV)
	if err != nil {
		return nil, nil, 0, err
	}
	obj := s.cfg.NewFunc()
	if err := s.decode(r.object, obj, rv); err != nil {
		return nil, nil, 0, err
	}
	return r, obj, rv, nil
}

func (s *Store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	k, err := s.objectKeyOf(key)
	if err != nil {
		return err
	}
	for {
		r, existing, _, err := s.current(ctx, k)
		if err != nil {
			return err
		}
		if r == nil {
			return storage.NewKeyNotFoundError(key, 0)
		}
		if preconditions != nil {
			if err := preconditions.Check(key, existing); err != nil {
				return err
			}
		}
		if err := validateDeletion(ctx, existing); err != nil {
			return err
		}
		writeID, err := storedWriteID(r.object)
		if err != nil {
			return storage.NewInternalError(err)
		}
		res, err := s.write(ctx, k, s.q.delete, append(s.keyArgs(k), r.columnRV)...)
		if err != nil {
			return storage.NewInternalError(fmt.Errorf("deleting %s: %w", key, err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return storage.NewInternalError(err)
		} else if n == 0 {
			continue // changed since read: read again
		}
		rv, err := s.commitWrite(ctx, k, writeID, true)
		if err != nil {
			return err
		}
		return s.decode(r.object, out, rv)
	}
}

// storedWriteID is the write id in a stored object's
// metadata.resourceVersion: walwatch carries it in the annotation of the
// object's DELETED event.
func storedWriteID(object []byte) (string, error) {
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(object, &m); err != nil {
		return "", fmt.Errorf("a stored object: %w", err)
	}
	return m.Metadata.ResourceVersion, nil
}

func (s *Store) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	k, err := s.writeKeyOf(key)
	if err != nil {
		return err
	}
	for {
		r, existing, rv, err := s.current(ctx, k)
		if err != nil {
			return err
		}
		if r == nil {
			if !ignoreNotFound {
				return storage.NewKeyNotFoundError(key, 0)
			}
			existing = s.cfg.NewFunc()
		}
		if preconditions != nil {
			if err := preconditions.Check(key, existing); err != nil {
				return err
			}
		}
		updated, ttl, err := tryUpdate(existing.DeepCopyObject(), storage.ResponseMeta{ResourceVersion: rv})
		if err != nil {
			return err
		}
		if ttl != nil && *ttl != 0 {
			return storage.NewInternalError(errors.New("apistorage: objects with a TTL are not supported"))
		}
		if r != nil {
			same, err := s.sameObject(existing, updated)
			if err != nil {
				return err
			}
			if same {
				return s.decode(r.object, destination, rv)
			}
		}
		writeID := newWriteID()
		data, err := s.encode(updated, writeID)
		if err != nil {
			return err
		}
		uid := ""
		if a, err := meta.Accessor(updated); err == nil {
			uid = string(a.GetUID())
		}
		now := time.Now().UTC()
		if r == nil {
			_, err = s.write(ctx, k, s.q.insert, append(s.keyArgs(k), s.cfg.Kind, uid, writeID, string(data), now, now)...)
			if isUniqueViolation(err) {
				continue // created meanwhile: read again
			}
			if err != nil {
				return storage.NewInternalError(fmt.Errorf("creating %s: %w", key, err))
			}
		} else {
			res, err := s.write(ctx, k, s.q.update, append([]any{uid, writeID, string(data), now}, append(s.keyArgs(k), r.columnRV)...)...)
			if err != nil {
				return storage.NewInternalError(fmt.Errorf("updating %s: %w", key, err))
			}
			if n, err := res.RowsAffected(); err != nil {
				return storage.NewInternalError(err)
			} else if n == 0 {
				continue // changed since read: read again
			}
		}
		newRV, err := s.commitWrite(ctx, k, writeID, false)
		if err != nil {
			return err
		}
		return s.decode(data, destination, newRV)
	}
}

// sameObject is etcd3's test for a write that changes nothing: equal
// encodings, resourceVersions left out.
func (s *Store) sameObject(a, b runtime.Object) (bool, error) {
	ea, err := s.encode(a, "")
	if err != nil {
		return false, err
	}
	eb, err := s.encode(b, "")
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea, eb), nil
}

// count is how many rows sc covers.
func (s *Store) count(ctx context.Context, sc scope) (int64, error) {
	query, args := s.scoped(s.q.count, sc)
	var n int64
	if err := s.cfg.DB.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, storage.NewInternalError(err)
	}
	return n, nil
}

func (s *Store) ReadinessCheck() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cfg.DB.PingContext(ctx); err != nil {
		return fmt.Errorf("apistorage: the database: %w", err)
	}
	if _, err := s.cfg.Client.FreshRV(ctx); err != nil {
		return fmt.Errorf("apistorage: walwatch: %w", err)
	}
	return nil
}

// RequestWatchProgress is a no-op: walwatch sends bookmarks on its own
// (--bookmark-interval) to every watch that allows them.
func (s *Store) RequestWatchProgress(ctx context.Context) error { return nil }

// isTransient: the database aborted the transaction, which may be run
// again: a deadlock or a serialization failure (PostgreSQL 40001, 40P01;
// MySQL 1213, 1205 a lock wait timeout).
func isTransient(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1213 || my.Number == 1205
	}
	return false
}

func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1062
	}
	return false
}
