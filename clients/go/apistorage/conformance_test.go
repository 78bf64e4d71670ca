package apistorage_test

// k8s.io/apiserver's own storage tests (k8s.io/apiserver/pkg/storage/testing),
// the suite every storage under kube-apiserver is judged by, run unchanged
// against the store on a real PostgreSQL and a real MariaDB, each test on a
// database and a walwatch of its own. Those the store cannot pass are
// listed, with the reason, in PROTOCOL.md ("A storage.Interface over the
// table") and in knownFailures (known_failures_test.go), which the run
// checks both ways: a listed test that passes fails the run, as does an
// unlisted one that fails.

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/storage"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"

	"github.com/walwatch/walwatch/clients/go/apistorage"
	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
}

// fixture is one test's store, on a database and a walwatch of its own.
type fixture struct {
	db    *testenv.DB
	ww    *testenv.Walwatch
	codec runtime.Codec
	store *apistorage.Store
	other *apistorage.Store // increaseRV's, made on its first call
}

// newFixture starts walwatch on db and opens the store as etcd3's tests
// open theirs: example.Pod under "/pods". walwatch sends bookmarks every
// second, so that the bookmark tests see one within their three seconds,
// and keeps its default replay window (testenv starts MariaDB's without
// one), within which a list's RV is its last write's.
func newFixture(t *testing.T, db *testenv.DB) *fixture {
	t.Helper()
	ww := testenv.StartWalwatch(t, db, testenv.WalwatchOptions{Args: []string{"--bookmark-interval", "1s", "--replay-window", "10m"}})
	f := &fixture{db: db, ww: ww, codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
	f.store = f.newStore(t, "pods")
	return f
}

// newStore opens a store of example.Pod objects as the table's resource
// (example.apiserver.k8s.io, v1, resource), under "/<resource>".
func (f *fixture) newStore(t *testing.T, resource string) *apistorage.Store {
	t.Helper()
	s, err := apistorage.New(context.Background(), apistorage.Config{
		Client:         f.ww.Client,
		DB:             f.db.SQL,
		Dialect:        f.db.Dialect,
		Codec:          f.codec,
		NewFunc:        func() runtime.Object { return &example.Pod{} },
		NewListFunc:    func() runtime.Object { return &example.PodList{} },
		Resource:       schema.GroupVersionResource{Group: example.GroupName, Version: "v1", Resource: resource},
		Kind:           "Pod",
		Cluster:        "apiserver",
		ResourcePrefix: "/" + resource,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// increaseRV is the v0.37 suite's IncreaseRVFunc: a write that moves the
// RV without touching the store's objects, as etcd3's tests put a key
// outside the resource. Here it writes an object of another resource of
// the table, and returns that write's RV.
func (f *fixture) increaseRV(ctx context.Context, t *testing.T) int64 {
	t.Helper()
	if f.other == nil {
		f.other = f.newStore(t, "increaserv")
	}
	out := &example.Pod{}
	err := f.other.GuaranteedUpdate(ctx, "/increaserv/ok", out, true, nil, storage.SimpleUpdate(
		func(obj runtime.Object) (runtime.Object, error) {
			pod := obj.(*example.Pod)
			pod.Name = "ok"
			pod.Labels = map[string]string{"n": strconv.FormatInt(time.Now().UnixNano(), 10)}
			return pod, nil
		}), nil)
	if err != nil {
		t.Fatalf("increaseRV: %v", err)
	}
	rv, err := strconv.ParseInt(out.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("increaseRV: %v", err)
	}
	return rv
}

// TestStorageOnPostgresAndMariaDB runs the suite on PostgreSQL, then on
// MariaDB.
func TestStorageOnPostgresAndMariaDB(t *testing.T) {
	t.Parallel()
	only := os.Getenv(knownFailureEnv)
	for _, db := range []struct {
		name  string
		newDB func(testing.TB) *testenv.DB
	}{{"Postgres", testenv.NewPostgres}, {"MariaDB", testenv.NewMariaDB}} {
		t.Run(db.name, func(t *testing.T) { runConformance(t, db.name, db.newDB, only) })
	}
}

// conformanceTest is one of the suite's functions, as etcd3's tests call it.
type conformanceTest struct {
	name string
	// serial: it sets a feature gate, which featuregatetesting refuses to do
	// from two tests at once.
	serial bool
	run    func(ctx context.Context, t *testing.T, f *fixture)
}

// runConformance runs every test of the suite on one database, each on a
// database and a walwatch of its own: the serial ones one after the other,
// then the rest in parallel (after the function returns). A test listed in
// knownFailures runs only when only names it (a child run of
// TestStorageKnownFailuresOnPostgresAndMariaDB, which checks how it fails).
func runConformance(t *testing.T, dialect string, newDB func(testing.TB) *testenv.DB, only string) {
	for _, tc := range append(conformance, versionTests...) {
		_, known := knownFailures[dialect+"/"+tc.name]
		if known != (only == dialect+"/"+tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			if !tc.serial {
				t.Parallel()
			}
			tc.run(context.Background(), t, newFixture(t, newDB(t)))
		})
	}
}

// keyExists is the KeyValidation of RunTestCreate and RunTestGuaranteedUpdate:
// the object is in the table.
func (f *fixture) keyExists(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	var out example.Pod
	if err := f.store.Get(ctx, key, storage.GetOptions{}, &out); err != nil {
		t.Fatalf("expecting the object of %s in the table: %v", key, err)
	}
}

// noCallCount is the CallsValidation of the list tests: it counts etcd's
// calls, which have no counterpart in SQL.
func noCallCount(t *testing.T, pageSize, estimatedProcessedObjects uint64) {}

// compact is the suite's Compaction: walwatch restarted without a replay
// window keeps no event from before its restart, so that a watch from an
// older RV gets 410 Expired, as one from a compacted revision does on etcd;
// and the store lets go of its held snapshots at or below resourceVersion,
// as etcd forgets the revisions up to it.
//
// On PostgreSQL the slot still holds the window walwatch kept before: it
// sends it again after the first restart, so walwatch restarts once more,
// with its window, when that restart has confirmed the slot past the WAL
// written before it.
func (f *fixture) compact(ctx context.Context, t *testing.T, resourceVersion string) {
	t.Helper()
	f.ww.RestartWith(t, "--replay-window", "0s")
	if f.db.Dialect == walwatch.Postgres {
		deadline := time.Now().Add(compactionBound)
		var lsn string
		if err := f.db.SQL.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		for {
			var passed bool
			err := f.db.SQL.QueryRowContext(ctx,
				"SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", lsn, f.ww.Slot).Scan(&passed)
			if err != nil {
				t.Fatal(err)
			}
			if passed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("walwatch did not confirm slot %s past %s within %v", f.ww.Slot, lsn, compactionBound)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The window back: the slot is past everything now, so nothing is
		// sent again, and list RVs are again the last write's.
		f.ww.RestartWith(t, "--replay-window", "10m")
	}
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("compaction at %q: %v", resourceVersion, err)
	}
	apistorage.ReleaseHeldSnapshots(f.store, rv)
}

// compactionBound bounds how long walwatch takes to confirm its slot after
// a restart (it reports every second): an upper bound on a condition.
const compactionBound = 2 * time.Minute

// The suite's tests, in etcd3's order: k8s.io/apiserver/pkg/storage/etcd3/
// watcher_test.go, then the store and list tests a watch depends on (its
// starting RVs come from them) of store_test.go. Not run: those that need
// etcd's value transformer (InterfaceWithPrefixTransformer: TestWatchError,
// TestGuaranteedUpdate, ...) or a TTL (TestCreateWithTTL,
// TestGuaranteedUpdateWithTTL), which the table does not have.
//
// The tests whose signature changed between v0.32 and v0.37 are in
// versionTests (conformance_v032_test.go, conformance_v037_test.go).
//
// RunTestWatchDispatchBookmarkEvents: etcd3 runs it with
// expectedWatchBookmarks=false, since etcd sends none on its own; walwatch
// does (--bookmark-interval), so it runs with true.
var conformance = []conformanceTest{
	{"Watch", false, func(ctx context.Context, t *testing.T, f *fixture) { storagetesting.RunTestWatch(ctx, t, f.store) }},
	{"ClusterScopedWatch", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestClusterScopedWatch(ctx, t, f.store)
	}},
	{"NamespaceScopedWatch", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestNamespaceScopedWatch(ctx, t, f.store)
	}},
	{"DeleteTriggerWatch", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDeleteTriggerWatch(ctx, t, f.store)
	}},
	{"WatchFromZero", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchFromZero(ctx, t, f.store, f.compact)
	}},
	{"WatchFromNonZero", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchFromNonZero(ctx, t, f.store)
	}},
	{"DelayedWatchDelivery", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDelayedWatchDelivery(ctx, t, f.store)
	}},
	{"WatchContextCancel", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchContextCancel(ctx, t, f.store)
	}},
	{"WatcherTimeout", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatcherTimeout(ctx, t, f.store)
	}},
	{"WatchDeleteEventObjectHaveLatestRV", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV(ctx, t, f.store)
	}},
	{"WatchInitializationSignal", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchInitializationSignal(ctx, t, f.store)
	}},
	{"WatchDispatchBookmarkEvents", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, f.store, true)
	}},
	{"WatchBookmarksWithCorrectResourceVersion", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestOptionalWatchBookmarksWithCorrectResourceVersion(ctx, t, f.store)
	}},
	{"SendInitialEventsBackwardCompatibility", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunSendInitialEventsBackwardCompatibility(ctx, t, f.store)
	}},
	{"WatchSemantics", true, func(ctx context.Context, t *testing.T, f *fixture) { storagetesting.RunWatchSemantics(ctx, t, f.store) }},
	{"WatchSemanticInitialEventsExtended", true, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunWatchSemanticInitialEventsExtended(ctx, t, f.store)
	}},
	{"WatchListMatchSingle", true, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunWatchListMatchSingle(ctx, t, f.store)
	}},
	{"Create", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestCreate(ctx, t, f.store, f.keyExists)
	}},
	{"CreateWithKeyExist", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestCreateWithKeyExist(ctx, t, f.store)
	}},
	{"Get", false, func(ctx context.Context, t *testing.T, f *fixture) { storagetesting.RunTestGet(ctx, t, f.store) }},
	{"UnconditionalDelete", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestUnconditionalDelete(ctx, t, f.store)
	}},
	{"ConditionalDelete", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestConditionalDelete(ctx, t, f.store)
	}},
	{"DeleteWithSuggestion", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDeleteWithSuggestion(ctx, t, f.store)
	}},
	{"DeleteWithSuggestionAndConflict", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDeleteWithSuggestionAndConflict(ctx, t, f.store)
	}},
	{"DeleteWithSuggestionOfDeletedObject", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(ctx, t, f.store)
	}},
	{"ValidateDeletionWithSuggestion", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestValidateDeletionWithSuggestion(ctx, t, f.store)
	}},
	{"ValidateDeletionWithOnlySuggestionValid", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(ctx, t, f.store)
	}},
	{"DeleteWithConflict", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestDeleteWithConflict(ctx, t, f.store)
	}},
	{"PreconditionalDeleteWithSuggestion", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestPreconditionalDeleteWithSuggestion(ctx, t, f.store)
	}},
	{"PreconditionalDeleteWithOnlySuggestionPass", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(ctx, t, f.store)
	}},
	{"ListPaging", false, func(ctx context.Context, t *testing.T, f *fixture) { storagetesting.RunTestListPaging(ctx, t, f.store) }},
	{"GetListRecursivePrefix", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestGetListRecursivePrefix(ctx, t, f.store)
	}},
	{"GuaranteedUpdateWithConflict", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestGuaranteedUpdateWithConflict(ctx, t, f.store)
	}},
	{"GuaranteedUpdateWithSuggestionAndConflict", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(ctx, t, f.store)
	}},
	{"ListContinuation", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestListContinuation(ctx, t, f.store, noCallCount)
	}},
	{"ListPaginationRareObject", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestListPaginationRareObject(ctx, t, f.store, noCallCount)
	}},
	{"ListContinuationWithFilter", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestListContinuationWithFilter(ctx, t, f.store, noCallCount)
	}},
	{"NamespaceScopedList", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestNamespaceScopedList(ctx, t, f.store)
	}},
	{"ListInconsistentContinuation", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestListInconsistentContinuation(ctx, t, f.store, f.compact)
	}},
}
