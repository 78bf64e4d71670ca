package walwatchstorage_test

// The consumer's judge: client-go's own informers, each listing through the
// storage layer's List and watching through its Watch (the walwatch
// client), as Clusterpedia's APIServer would serve them, against a private
// PostgreSQL and a private MariaDB under a Clusterpedia-shaped writer (21
// resource types in three clusters, pods hot). After churn, after a restart
// of walwatch, after a restart of the database and after a forced 410 and
// its relist, every informer's store must equal a SQL SELECT of its
// selection.
//
// The informers run as the process's client-go is built: the test module's
// go.mod pins k8s.io v0.32 (Clusterpedia's), go.k8s-v0.37.mod v0.37; and
// KUBE_FEATURE_WatchListClient=true or false picks list-then-watch or
// WatchList (tests/tools/run-go-tests.sh runs both). The mode in force is
// logged, and checked: a WatchList run must see its informers start with
// sendInitialEvents watches and never list.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"

	internal "github.com/clusterpedia-io/api/clusterpedia"
	"github.com/clusterpedia-io/clusterpedia/pkg/runtime/resourceconfig"
	"github.com/clusterpedia-io/clusterpedia/pkg/storage"

	"github.com/walwatch/walwatch/clients/go/clusterpedia/walwatchstorage"
	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// Bounds on conditions, for a loaded 2-core machine. Nothing waits for
// them to pass.
const (
	catchUpBound = 3 * time.Minute // every informer reaches the writers' last RV
	storeBound   = time.Minute     // then its store reaches SQL
)

var clusters = []string{"c1", "c2", "c3"}

func TestInformerPostgres(t *testing.T) {
	t.Parallel()
	db, server := testenv.NewPrivatePostgres(t)
	runInformers(t, db, server)
}

func TestInformerMariaDB(t *testing.T) {
	t.Parallel()
	db, server := testenv.NewPrivateMariaDB(t)
	runInformers(t, db, server)
}

// watchList is whether client-go's reflectors start with a WatchList here
// (KUBE_FEATURE_WatchListClient, or the client-go version's default).
func watchList() bool {
	return clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)
}

func runInformers(t *testing.T, db *testenv.DB, server *testenv.Server) {
	t.Logf("client-go WatchListClient=%v (KUBE_FEATURE_WatchListClient=%q)", watchList(), os.Getenv("KUBE_FEATURE_WatchListClient"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// A bookmark a second lets a quiet informer's RV follow walwatch's, so
	// that "caught up" is a position every informer reaches. The replay
	// window lets informers resume across walwatch's restart.
	ww := testenv.StartWalwatch(t, db, testenv.WalwatchOptions{Args: []string{"--bookmark-interval", "1s", "--replay-window", "10m"}})
	factory := newFactory(t, db, ww)

	run := &informerRun{t: t, ctx: ctx, db: db, ww: ww}
	// The APIServer opens its watches at startup: on an empty table, for
	// every resource, and for one no row will ever have.
	gadgets := testenv.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}, Kind: "Gadget", Namespaced: true}
	for _, r := range append(testenv.DefaultResources(), gadgets) {
		for _, c := range clusters {
			run.add(factory, r, selector{cluster: c})
		}
	}
	run.add(factory, testenv.Pods, selector{cluster: "c1", namespace: "default"})
	run.add(factory, testenv.Pods, selector{cluster: "c2", labels: "app in (web,api),tier!=cache"})
	run.add(factory, testenv.Pods, selector{clusters: []string{"c1", "c3"}})
	run.start()

	// TolerateErrors: writes go on across the database's restart (a failed
	// write may or may not have committed; the checks compare with SQL).
	writer := testenv.NewWriter(db, testenv.WriterConfig{Seed: 37, Clusters: clusters, RemoveClusters: true, TolerateErrors: true})
	if err := writer.Seed(ctx, 3); err != nil {
		t.Fatalf("seeding: %v", err)
	}
	// More pods in c1 than client-go's list page (500), and informers that
	// start now, as an APIServer replica starting late: their first lists
	// page through one snapshot, continue tokens and all, while the writer
	// churns.
	for n := 0; n < 520; n++ {
		if err := writer.Put(ctx, testenv.Pods, "c1", "bulk", fmt.Sprintf("bulk-%d", n), map[string]string{"app": "web"}); err != nil {
			t.Fatalf("seeding: %v", err)
		}
	}
	stopLate := writer.RunInBackground(ctx, 0)
	run.add(factory, testenv.Pods, selector{cluster: "c1"})
	run.add(factory, testenv.Pods, selector{clusters: []string{"c1", "c2"}})
	run.start()
	if err := stopLate(); err != nil {
		t.Fatalf("writing: %v", err)
	}

	t.Run("churn", func(t *testing.T) {
		run.t = t
		if err := writer.Steps(ctx, 1500); err != nil {
			t.Fatalf("writing: %v", err)
		}
		run.check("after churn")
	})

	// A restart of walwatch (within --replay-window) and one of the
	// database are invisible: the informers watch again from where they
	// were, with no 410 and no read of the table.
	invisibleRestart := func(what string, restart func(t testing.TB)) {
		t.Run(what, func(t *testing.T) {
			run.t = t
			expired, relists := run.expiredTotal(), run.relists()
			stop := writer.RunInBackground(ctx, 0)
			writer.WaitWrites(t, 300, catchUpBound)
			restart(t)
			writer.WaitWrites(t, 300, catchUpBound)
			if err := stop(); err != nil {
				t.Fatalf("writing: %v", err)
			}
			run.check("after the " + what)
			if got := run.relists() - relists; got != 0 {
				t.Errorf("the %s made the informers read the table %d times; they must watch again from where they were", what, got)
			}
			if got := run.expiredTotal() - expired; got != 0 {
				t.Errorf("the %s cost %d informers a 410; they must resume exactly", what, got)
			}
		})
	}
	invisibleRestart("walwatch restart", ww.Restart)
	invisibleRestart("database restart", server.Restart)

	t.Run("forced 410", func(t *testing.T) {
		run.t = t
		expired := run.expiredTotal()
		// TRUNCATE is a change walwatch cannot send as events: every watcher
		// gets 410 Expired and relists, then the collector fills the table
		// again.
		if _, err := db.SQL.ExecContext(ctx, "TRUNCATE TABLE resources"); err != nil {
			t.Fatalf("TRUNCATE: %v", err)
		}
		if err := writer.Seed(ctx, 3); err != nil {
			t.Fatalf("seeding again: %v", err)
		}
		if err := writer.Steps(ctx, 600); err != nil {
			t.Fatalf("writing: %v", err)
		}
		run.check("after a forced 410 and the relist")
		if got := run.expiredTotal() - expired; got < int64(len(run.informers)) {
			t.Errorf("%d 410 Expired seen, want one at least for each of the %d informers", got, len(run.informers))
		}
	})

	t.Logf("writes %d; informers %d; lists %d, watches %d (WatchList %d), 410s %d",
		writer.Writes(), len(run.informers), run.sum(func(i *informer) int64 { return i.lists.Load() }),
		run.sum(func(i *informer) int64 { return i.watches.Load() }),
		run.sum(func(i *informer) int64 { return i.watchLists.Load() }), run.expiredTotal())
	if watchList() {
		if n := run.sum(func(i *informer) int64 { return i.lists.Load() }); n != 0 {
			t.Errorf("WatchListClient is on, yet the informers listed %d times", n)
		}
	} else if n := run.sum(func(i *informer) int64 { return i.watchLists.Load() }); n != 0 {
		t.Errorf("WatchListClient is off, yet the informers sent %d WatchLists", n)
	}
}

// newFactory is the storage layer on db, as the APIServer's configuration
// file would give it.
func newFactory(t *testing.T, db *testenv.DB, ww *testenv.Walwatch) *walwatchstorage.StorageFactory {
	t.Helper()
	typ := "postgres"
	if db.Dialect == walwatch.MySQL {
		typ = "mysql"
	}
	cfg, err := walwatchstorage.ParseConfig([]byte(fmt.Sprintf("type: %s\ndsn: %q\nwalwatch:\n  endpoint: %q\n", typ, db.DSN, ww.Endpoint)))
	if err != nil {
		t.Fatalf("the storage's configuration: %v", err)
	}
	f, err := walwatchstorage.New(cfg, nil)
	if err != nil {
		t.Fatalf("the storage: %v", err)
	}
	t.Cleanup(func() { f.Shutdown() })
	return f
}

// selector is what one informer selects, beyond its resource.
type selector struct {
	cluster   string   // one cluster (the APIServer's /clusters/{c} path)
	clusters  []string // several (Clusterpedia's clusters search label)
	namespace string
	labels    string
}

func (s selector) String() string {
	parts := []string{}
	if s.cluster != "" {
		parts = append(parts, "cluster="+s.cluster)
	}
	if len(s.clusters) > 0 {
		parts = append(parts, "clusters="+strings.Join(s.clusters, ","))
	}
	if s.namespace != "" {
		parts = append(parts, "namespace="+s.namespace)
	}
	if s.labels != "" {
		parts = append(parts, "labels="+s.labels)
	}
	return strings.Join(parts, " ")
}

// informer is one client-go informer over the storage, and what its
// ListWatch saw.
type informer struct {
	name     string
	resource testenv.Resource
	sel      selector
	// A SharedIndexInformer keys its store by namespace/name, so it serves
	// one cluster; several clusters take a Reflector into a store keyed by
	// cluster too, as a multi-cluster client would build it.
	shared    cache.SharedIndexInformer
	reflector *cache.Reflector
	store     cache.Store
	started   bool

	lists, watches, watchLists, expired atomic.Int64
}

func (i *informer) lastSyncRV() string {
	if i.shared != nil {
		return i.shared.LastSyncResourceVersion()
	}
	return i.reflector.LastSyncResourceVersion()
}

type informerRun struct {
	t         *testing.T
	ctx       context.Context
	db        *testenv.DB
	ww        *testenv.Walwatch
	informers []*informer
	stop      chan struct{}
}

func (r *informerRun) add(f *walwatchstorage.StorageFactory, res testenv.Resource, sel selector) {
	r.t.Helper()
	rs, err := f.NewResourceStorage(&storage.ResourceStorageConfig{ResourceConfig: resourceconfig.ResourceConfig{
		Namespaced:      res.Namespaced,
		GroupResource:   res.GVR.GroupResource(),
		StorageResource: res.GVR,
		MemoryResource:  res.GVR,
		Codec:           unstructured.UnstructuredJSONScheme,
	}})
	if err != nil {
		r.t.Fatalf("the storage of %s: %v", res.GVR, err)
	}
	i := &informer{name: res.GVR.String() + " " + sel.String(), resource: res, sel: sel}
	options := func(opts metav1.ListOptions) (*internal.ListOptions, error) {
		out := &internal.ListOptions{}
		if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, &out.ListOptions, nil); err != nil {
			return nil, err
		}
		if sel.labels != "" {
			out.LabelSelector, _ = labels.Parse(sel.labels)
		}
		if sel.cluster != "" {
			out.ClusterNames = []string{sel.cluster}
		}
		if len(sel.clusters) > 0 {
			out.ClusterNames = sel.clusters
		}
		if sel.namespace != "" {
			out.Namespaces = []string{sel.namespace}
		}
		return out, nil
	}
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			i.lists.Add(1)
			in, err := options(opts)
			if err != nil {
				return nil, err
			}
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion(res.APIVersion())
			list.SetKind(res.Kind + "List")
			if err := rs.List(r.ctx, list, in); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			i.watches.Add(1)
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				i.watchLists.Add(1)
			}
			in, err := options(opts)
			if err != nil {
				return nil, err
			}
			w, err := rs.Watch(r.ctx, in)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error && apierrors.IsResourceExpired(apierrors.FromObject(e.Object)) {
					i.expired.Add(1)
				}
				return e, true
			}), nil
		},
	}
	// The expected type names the kind, as a dynamic informer's does: the
	// reflector then drops any event, bookmarks included, of another kind,
	// so walwatch's bookmarks must name the resource's kind.
	expected := &unstructured.Unstructured{}
	expected.SetAPIVersion(res.APIVersion())
	expected.SetKind(res.Kind)
	if len(sel.clusters) > 0 {
		i.store = cache.NewStore(clusterKey)
		i.reflector = cache.NewReflectorWithOptions(lw, expected, i.store, cache.ReflectorOptions{Name: i.name})
	} else {
		i.shared = cache.NewSharedIndexInformer(lw, expected, 0, cache.Indexers{})
		i.store = i.shared.GetStore()
	}
	r.informers = append(r.informers, i)
}

// clusterKey keys an object by cluster, namespace and name.
func clusterKey(obj any) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetAnnotations()["shadow.clusterpedia.io/cluster-name"] + "/" + m.GetNamespace() + "/" + m.GetName(), nil
}

// start runs the informers not yet running, and waits until they synced.
func (r *informerRun) start() {
	if r.stop == nil {
		r.stop = make(chan struct{})
		stop := r.stop
		r.t.Cleanup(func() { close(stop) })
	}
	stop := r.stop
	for _, i := range r.informers {
		if i.started {
			continue
		}
		i.started = true
		if i.shared != nil {
			go i.shared.Run(stop)
		} else {
			go i.reflector.Run(stop)
		}
	}
	// Synced: each informer has its first state, of a table still empty.
	deadline := time.Now().Add(catchUpBound)
	for _, i := range r.informers {
		for i.lastSyncRV() == "" {
			if time.Now().After(deadline) {
				r.t.Fatalf("informer %s did not sync within %s", i.name, catchUpBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (r *informerRun) sum(f func(*informer) int64) int64 {
	var n int64
	for _, i := range r.informers {
		n += f(i)
	}
	return n
}

// relists counts lists and WatchLists: the informers' full reads of the
// table.
func (r *informerRun) relists() int64 {
	return r.sum(func(i *informer) int64 { return i.lists.Load() + i.watchLists.Load() })
}

func (r *informerRun) expiredTotal() int64 {
	return r.sum(func(i *informer) int64 { return i.expired.Load() })
}

// check waits until every informer has reached the RV of the last write
// (walwatch's freshrv once the writers stopped: a position), then until its
// store holds what SQL holds for its selection, and fails with the
// difference if it does not within storeBound.
func (r *informerRun) check(when string) {
	t := r.t
	t.Helper()
	target := r.freshRV()
	deadline := time.Now().Add(catchUpBound)
	for _, i := range r.informers {
		for !rvAtLeast(i.lastSyncRV(), target) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: informer %s is at RV %q, not at the last write's %s within %s", when, i.name, i.lastSyncRV(), target, catchUpBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	diffs := make([]string, len(r.informers))
	for n, i := range r.informers {
		wg.Add(1)
		go func(n int, i *informer) {
			defer wg.Done()
			want, err := r.sqlState(i)
			if err != nil {
				diffs[n] = err.Error()
				return
			}
			end := time.Now().Add(storeBound)
			for {
				// The reflector passed the RV; the informer's own goroutine
				// applies what it queued to the store just after.
				diffs[n] = diffState(storeState(i), want)
				if diffs[n] == "" || time.Now().After(end) {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}(n, i)
	}
	wg.Wait()
	objects := 0
	for n, i := range r.informers {
		if diffs[n] != "" {
			t.Errorf("%s: informer %s differs from SQL:\n%s", when, i.name, diffs[n])
		}
		objects += len(i.store.ListKeys())
	}
	t.Logf("%s: %d informers at RV %s hold %d objects, as SQL does", when, len(r.informers), target, objects)
}

func (r *informerRun) freshRV() string {
	var rv string
	var err error
	deadline := time.Now().Add(catchUpBound)
	for {
		rv, err = r.ww.Client.FreshRV(r.ctx)
		if err == nil {
			return rv
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("walwatch's fresh RV: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rvAtLeast(rv, target string) bool {
	a, err1 := strconv.ParseUint(rv, 10, 64)
	b, err2 := strconv.ParseUint(target, 10, 64)
	return err1 == nil && err2 == nil && a >= b
}

// state is objects by cluster/namespace/name, as comparable JSON values.
type state map[string]any

// storeState is the informer's store, each object as it was stored: its
// member-cluster resourceVersion back in metadata, walwatch's annotation
// for it removed.
func storeState(i *informer) state {
	s := state{}
	for _, obj := range i.store.List() {
		u := obj.(*unstructured.Unstructured).DeepCopy()
		annotations := u.GetAnnotations()
		u.SetResourceVersion(annotations[walwatchstorage.MemberResourceVersionAnnotation])
		delete(annotations, walwatchstorage.MemberResourceVersionAnnotation)
		u.SetAnnotations(annotations)
		key, _ := clusterKey(u)
		data, _ := json.Marshal(u.Object)
		s[key] = normalize(data)
	}
	return s
}

// sqlState is what SQL holds for the informer's selection, now.
func (r *informerRun) sqlState(i *informer) (state, error) {
	s := state{}
	var sel labels.Selector = labels.Everything()
	if i.sel.labels != "" {
		sel, _ = labels.Parse(i.sel.labels)
	}
	rowClusters := []string{i.sel.cluster}
	if len(i.sel.clusters) > 0 {
		rowClusters = i.sel.clusters
	}
	for _, c := range rowClusters {
		rows, err := testenv.SelectRows(r.ctx, r.db, i.resource.GVR, c, i.sel.namespace)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(row.Object); err != nil {
				return nil, fmt.Errorf("row %s/%s/%s: %v", row.Cluster, row.Namespace, row.Name, err)
			}
			if !sel.Matches(labels.Set(u.GetLabels())) {
				continue
			}
			s[row.Cluster+"/"+row.Namespace+"/"+row.Name] = normalize(row.Object)
		}
	}
	return s, nil
}

func normalize(data []byte) any {
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return string(data)
	}
	return v
}

// diffState names the keys missing, extra or different, a few of each.
func diffState(got, want state) string {
	var missing, extra, differ []string
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			missing = append(missing, k)
		} else if !reflect.DeepEqual(g, w) {
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			differ = append(differ, fmt.Sprintf("%s:\n    store %s\n    SQL   %s", k, gj, wj))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(missing)+len(extra)+len(differ) == 0 {
		return ""
	}
	few := func(s []string) []string {
		sort.Strings(s)
		if len(s) > 5 {
			return append(s[:5], fmt.Sprintf("... %d more", len(s)-5))
		}
		return s
	}
	return fmt.Sprintf("  %d in SQL, %d in the store; missing %v; extra %v; different %v",
		len(want), len(got), few(missing), few(extra), few(differ))
}
