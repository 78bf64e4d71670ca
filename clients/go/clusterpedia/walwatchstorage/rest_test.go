package walwatchstorage

// The REST path as Clusterpedia's users meet it: client-go's dynamic client
// (what kubectl uses) against k8s.io/apiserver's ListResource over
// Clusterpedia's REST layer over this storage, with walwatch running on a
// database a Clusterpedia-shaped writer writes. Every test runs on
// PostgreSQL and on MariaDB (TestRESTPostgres*, TestRESTMariaDB*). The
// APIServer is restserver_test.go's.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"

	internal "github.com/clusterpedia-io/api/clusterpedia"

	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
)

func TestRESTPostgresListThenWatch(t *testing.T) { testRESTListThenWatch(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBListThenWatch(t *testing.T)  { testRESTListThenWatch(t, testenv.NewMariaDB(t)) }

func TestRESTPostgresPaging(t *testing.T) { testRESTPaging(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBPaging(t *testing.T)  { testRESTPaging(t, testenv.NewMariaDB(t)) }

func TestRESTPostgresWatchList(t *testing.T) { testRESTWatchList(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBWatchList(t *testing.T)  { testRESTWatchList(t, testenv.NewMariaDB(t)) }

func TestRESTPostgresExpired(t *testing.T) { testRESTExpired(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBExpired(t *testing.T)  { testRESTExpired(t, testenv.NewMariaDB(t)) }

func TestRESTPostgresTooLargeAndLagging(t *testing.T) {
	testRESTTooLargeAndLagging(t, testenv.NewPostgres(t))
}
func TestRESTMariaDBTooLargeAndLagging(t *testing.T) {
	testRESTTooLargeAndLagging(t, testenv.NewMariaDB(t))
}

func TestRESTPostgresUnsupportedOptions(t *testing.T) {
	testRESTUnsupportedOptions(t, testenv.NewPostgres(t))
}
func TestRESTMariaDBUnsupportedOptions(t *testing.T) {
	testRESTUnsupportedOptions(t, testenv.NewMariaDB(t))
}

func TestRESTPostgresVerbs(t *testing.T) { testRESTVerbs(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBVerbs(t *testing.T)  { testRESTVerbs(t, testenv.NewMariaDB(t)) }

// testContext bounds a whole test: a condition that never holds fails it
// instead of hanging the run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// restWriter writes deployments, replicasets and pods in two clusters and
// two namespaces.
func restWriter(t *testing.T, db *testenv.DB, cfg testenv.WriterConfig) *testenv.Writer {
	cfg.Clusters = []string{"c1", "c2"}
	cfg.Namespaces = []string{"default", "team-a"}
	if cfg.Resources == nil {
		cfg.Resources = []testenv.Resource{testenv.Deployments, testenv.ReplicaSets, testenv.Pods}
	}
	return testenv.NewWriter(db, cfg)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memberRV is the member cluster's resourceVersion of one row, as the
// table holds it now.
func memberRV(t *testing.T, db *testenv.DB, r testenv.Resource, cluster, namespace, name string) string {
	t.Helper()
	items, _ := rowItems(t, db, r.GVR, cluster, namespace)
	for _, i := range items {
		if i.Name == name {
			return i.MemberRV
		}
	}
	t.Fatalf("no row %s %s/%s/%s", r.GVR.Resource, cluster, namespace, name)
	return ""
}

// wantEvent is a write a watch must deliver.
type wantEvent struct {
	Type                     watch.EventType
	Cluster, Namespace, Name string
	MemberRV                 string
}

func (w wantEvent) String() string {
	return fmt.Sprintf("%s %s/%s/%s(rv %s)", w.Type, w.Cluster, w.Namespace, w.Name, w.MemberRV)
}

// precise makes the writes of one object's life through the writer's
// Put and Delete and returns the events they must give: ADDED, MODIFIED,
// DELETED.
type precise struct {
	t      *testing.T
	ctx    context.Context
	db     *testenv.DB
	writer *testenv.Writer
	res    testenv.Resource
}

func (p precise) put(cluster, namespace, name string, typ watch.EventType) wantEvent {
	p.t.Helper()
	must(p.t, p.writer.Put(p.ctx, p.res, cluster, namespace, name, nil))
	return wantEvent{typ, cluster, namespace, name, memberRV(p.t, p.db, p.res, cluster, namespace, name)}
}

func (p precise) delete(cluster, namespace, name string) wantEvent {
	p.t.Helper()
	rv := memberRV(p.t, p.db, p.res, cluster, namespace, name)
	must(p.t, p.writer.Delete(p.ctx, p.res, cluster, namespace, name))
	return wantEvent{watch.Deleted, cluster, namespace, name, rv}
}

// expectEvents reads the watch's next events (bookmarks skipped) and fails
// t unless they are want, in order, each with an RV above after and none
// below the one before it. It returns the last event's RV.
func expectEvents(t *testing.T, w watch.Interface, after string, want ...wantEvent) string {
	t.Helper()
	last := rvNumber(t, after)
	for i, want := range want {
		got := nextNonBookmark(t, w)
		g := wantEvent{got.Type, got.Item.Cluster, got.Item.Namespace, got.Item.Name, got.Item.MemberRV}
		if g != want {
			t.Fatalf("event %d: got %v, want %v", i, got, want)
		}
		rv := rvNumber(t, got.RV)
		if rv <= rvNumber(t, after) || rv < last {
			t.Fatalf("event %d (%v): RV %d, after the watch's %s and the previous event's %d", i, got, rv, after, last)
		}
		last = rv
	}
	return strconv.FormatUint(last, 10)
}

// testRESTListThenWatch: a list carries the table's rows and an RV; a
// watch from it, while the writer writes, brings the list to the table
// exactly; precise writes then come as their events, in order, and
// bookmarks come when allowed. Deployments (unstructured) at
// /apis/apps/v1/namespaces/team-a/deployments; pods (typed) at
// Clusterpedia's per-cluster path.
func testRESTListThenWatch(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	env := newRESTEnv(t, db, restEnvOptions{Walwatch: testenv.WalwatchOptions{Args: []string{"--bookmark-interval=1s"}}})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 1, Hot: testenv.Deployments.GVR})
	must(t, writer.Seed(ctx, 6))
	const ns = "team-a"
	deployments := env.Client.Resource(testenv.Deployments.GVR).Namespace(ns)

	// A quiet list is the table as it is, whole objects included.
	list, err := deployments.List(ctx, metav1.ListOptions{})
	must(t, err)
	rows, objects := rowItems(t, db, testenv.Deployments.GVR, "", ns)
	if len(rows) == 0 {
		t.Fatalf("the seed wrote no deployment in %s", ns)
	}
	rvNumber(t, list.GetResourceVersion())
	if list.GetContinue() != "" {
		t.Errorf("a list without limit has continue %q", list.GetContinue())
	}
	checkListMatchesRows(t, "deployments in "+ns, list.Items, list.GetResourceVersion(), rows, objects, true)

	// The per-cluster path: c1's pods, typed.
	c1pods := env.ClusterClient(t, "c1").Resource(testenv.Pods.GVR)
	podList, err := c1pods.List(ctx, metav1.ListOptions{})
	must(t, err)
	podRows, _ := rowItems(t, db, testenv.Pods.GVR, "c1", "")
	rvNumber(t, podList.GetResourceVersion())
	checkListMatchesRows(t, "c1's pods", podList.Items, podList.GetResourceVersion(), podRows, nil, false)

	// List and watch while the writer writes: the list plus the watch's
	// events is the table once the writer stopped.
	stop := writer.RunInBackground(ctx, 300)
	defer stop()
	before := writer.Writes()
	waitWrites(t, writer, before+20)
	list, err = deployments.List(ctx, metav1.ListOptions{})
	must(t, err)
	listRV := list.GetResourceVersion()
	rvNumber(t, listRV)
	w, err := deployments.Watch(ctx, metav1.ListOptions{ResourceVersion: listRV, AllowWatchBookmarks: true})
	must(t, err)
	defer w.Stop()
	waitWrites(t, writer, writer.Writes()+60)
	must(t, stop())

	state := map[string]restItem{}
	for i := range list.Items {
		item, _ := servedItem(t, &list.Items[i])
		state[item.Cluster+"/"+item.Name] = item
	}
	p := precise{t, ctx, db, writer, testenv.Deployments}
	marker := p.put("c1", ns, "rest-marker", watch.Added)
	last := rvNumber(t, listRV)
	events := 0
	for {
		e := nextEvent(t, w)
		if e.Type == watch.Error {
			t.Fatalf("the watch from the list's RV %s: %v", listRV, e.Err)
		}
		rv := rvNumber(t, e.RV)
		if rv < last || (e.Type != watch.Bookmark && rv <= rvNumber(t, listRV)) {
			t.Fatalf("%v: its RV is below the list's %s or the previous event's %d", e, listRV, last)
		}
		last = rv
		if e.Type == watch.Bookmark {
			continue
		}
		if e.Item.Namespace != ns {
			t.Fatalf("%v: not in %s", e, ns)
		}
		events++
		key := e.Item.Cluster + "/" + e.Item.Name
		switch e.Type {
		case watch.Added, watch.Modified:
			state[key] = e.Item
		case watch.Deleted:
			delete(state, key)
		}
		if e.Item.Name == marker.Name {
			break
		}
	}
	var folded []restItem
	for _, item := range state {
		folded = append(folded, item)
	}
	sortItems(folded)
	rows, _ = rowItems(t, db, testenv.Deployments.GVR, "", ns)
	if fmt.Sprint(folded) != fmt.Sprint(rows) {
		t.Fatalf("the list at %s and the %d events after it are not the table:\n got  %v\n want %v", listRV, events, folded, rows)
	}
	if events < 2 {
		t.Fatalf("only %d events while the writer wrote: the test proved little", events)
	}

	// Precise writes come as exactly their events, in order.
	want := []wantEvent{
		p.put("c2", ns, "rest-a", watch.Added),
		p.put("c2", ns, "rest-a", watch.Modified),
		p.put("c1", "default", "rest-elsewhere", watch.Added), // another namespace: not this watch's
		p.put("c1", ns, "rest-b", watch.Added),
		p.delete("c2", ns, "rest-a"),
		p.put("c1", ns, "rest-b", watch.Modified),
	}
	lastRV := expectEvents(t, w, strconv.FormatUint(last, 10), append(want[:2:2], want[3:]...)...)

	// A bookmark comes (--bookmark-interval=1s), at or above the last event.
	for {
		e := nextEvent(t, w)
		if e.Type == watch.Bookmark {
			if rvNumber(t, e.RV) < rvNumber(t, lastRV) {
				t.Fatalf("bookmark at %s, below the last event's %s", e.RV, lastRV)
			}
			if kind := e.Obj.GetKind(); kind != testenv.Deployments.Kind {
				t.Errorf("the bookmark's kind is %q, want %q", kind, testenv.Deployments.Kind)
			}
			break
		}
		t.Fatalf("got %v, want a BOOKMARK", e)
	}
}

// waitWrites waits until the writer has made n writes.
func waitWrites(t *testing.T, w *testenv.Writer, n int64) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for w.Writes() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the writer made %d writes in %v, want %d (failures %d)", w.Writes(), eventBound, n, w.Failures())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHeldLists waits until the storage holds no paged list's snapshot.
func waitHeldLists(t *testing.T, f *StorageFactory) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for f.lists.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the storage still holds %d lists after %v (heldListIdle %v)", f.lists.len(), eventBound, f.config.Walwatch.HeldListIdle.Duration)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testRESTPaging: pages of 3 through /api/v1/pods (typed, every cluster),
// with writes between the pages, are one snapshot: the same RV on every
// page, together the table at the first page's RV; a watch from it
// replays exactly the writes made between the pages. A continue of a
// snapshot no longer held is 410 Expired, and client-go's pager then lists
// again whole.
func testRESTPaging(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	// The pages below hold their snapshot for the default heldListIdle (a
	// minute), however slow the machine; a second APIServer on the same
	// walwatch lets go of its snapshots after a second, for the expiry.
	env := newRESTEnv(t, db, restEnvOptions{})
	expiring := newRESTFrontEnd(t, db, env.Walwatch, restEnvOptions{HeldListIdle: time.Second})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 2, Resources: []testenv.Resource{testenv.Pods}})
	must(t, writer.Seed(ctx, 10))
	pods := env.Client.Resource(testenv.Pods.GVR)

	first, err := pods.List(ctx, metav1.ListOptions{Limit: 3})
	must(t, err)
	rowsAtRV, _ := rowItems(t, db, testenv.Pods.GVR, "", "") // nothing was written since
	if len(rowsAtRV) < 15 {
		t.Fatalf("the seed wrote %d pods, want about 20", len(rowsAtRV))
	}
	listRV := first.GetResourceVersion()
	rvNumber(t, listRV)
	if n := len(first.Items); n != 3 {
		t.Fatalf("the first page has %d items, want 3", n)
	}
	if rem := first.GetRemainingItemCount(); rem == nil || *rem != int64(len(rowsAtRV)-3) {
		t.Errorf("the first page's remainingItemCount is %v, want %d", rem, len(rowsAtRV)-3)
	}

	// One write between each two pages: a new pod, a change, a delete.
	p := precise{t, ctx, db, writer, testenv.Pods}
	seeded := make([]restItem, len(rowsAtRV))
	copy(seeded, rowsAtRV)
	var writes []wantEvent
	items := first.Items
	pages := 1
	for cont := first.GetContinue(); cont != ""; pages++ {
		if pages > 20 {
			t.Fatalf("more than 20 pages of 3 for %d pods", len(rowsAtRV))
		}
		switch old := seeded[pages%len(seeded)]; pages % 3 {
		case 0:
			writes = append(writes, p.put("c1", "default", fmt.Sprintf("rest-new-%d", pages), watch.Added))
		case 1:
			writes = append(writes, p.put(old.Cluster, old.Namespace, old.Name, watch.Modified))
		case 2:
			writes = append(writes, p.delete(old.Cluster, old.Namespace, old.Name))
		}
		page, err := pods.List(ctx, metav1.ListOptions{Limit: 3, Continue: cont})
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		if rv := page.GetResourceVersion(); rv != listRV {
			t.Fatalf("page %d has resourceVersion %s, the first had %s", pages+1, rv, listRV)
		}
		if n := len(page.Items); n > 3 || n == 0 {
			t.Fatalf("page %d has %d items, want 1 to 3", pages+1, n)
		}
		if next := page.GetContinue(); next != "" && len(page.Items) != 3 {
			t.Fatalf("page %d has %d items and a continue", pages+1, len(page.Items))
		}
		items = append(items, page.Items...)
		cont = page.GetContinue()
	}
	if want := (len(rowsAtRV) + 2) / 3; pages != want {
		t.Errorf("%d pages for %d pods, want %d", pages, len(rowsAtRV), want)
	}
	checkListMatchesRows(t, "the pages", items, listRV, rowsAtRV, nil, false)
	if rowsNow, _ := rowItems(t, db, testenv.Pods.GVR, "", ""); fmt.Sprint(rowsNow) == fmt.Sprint(rowsAtRV) {
		t.Fatalf("the writes between the pages changed nothing in the table: the test proved little")
	}

	// A watch from the pages' RV replays the writes made between them,
	// exactly: each, in order, then the marker written after.
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: listRV})
	must(t, err)
	defer w.Stop()
	marker := p.put("c2", "team-a", "rest-marker", watch.Added)
	expectEvents(t, w, listRV, append(writes, marker)...)

	// A continue after heldListIdle: 410 Expired.
	pods = expiring.Client.Resource(testenv.Pods.GVR)
	page, err := pods.List(ctx, metav1.ListOptions{Limit: 3})
	must(t, err)
	if page.GetContinue() == "" {
		t.Fatal("no continue on a first page of 3")
	}
	waitHeldLists(t, expiring.Factory)
	_, err = pods.List(ctx, metav1.ListOptions{Limit: 3, Continue: page.GetContinue()})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("a continue of a list no longer held: %v, want 410 Expired", err)
	}

	// client-go's pager, whose continue expires, lists again whole.
	expired := 0
	pg := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := pods.List(ctx, opts)
		if apierrors.IsResourceExpired(err) {
			expired++
		}
		if err != nil {
			return nil, err
		}
		if opts.Continue == "" && list.GetContinue() != "" {
			waitHeldLists(t, expiring.Factory) // the snapshot is let go before page 2
		}
		return list, nil
	})
	pg.PageSize = 3
	pg.FullListIfExpired = true
	obj, _, err := pg.List(ctx, metav1.ListOptions{})
	must(t, err)
	if expired != 1 {
		t.Fatalf("the pager's continue was answered 410 %d times, want once", expired)
	}
	full, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		t.Fatalf("the pager's list is a %T, want the full list", obj)
	}
	if full.GetContinue() != "" {
		t.Errorf("the pager's full list has continue %q", full.GetContinue())
	}
	rowsNow, _ := rowItems(t, db, testenv.Pods.GVR, "", "")
	checkListMatchesRows(t, "the pager's full list", full.Items, full.GetResourceVersion(), rowsNow, nil, false)
	if n := meta.LenList(obj); n != len(rowsNow) {
		t.Errorf("the pager's list has %d items, the table %d", n, len(rowsNow))
	}
}

// testRESTWatchList: a WatchList (sendInitialEvents) of c1's pods at
// Clusterpedia's per-cluster path gives an ADDED for each of c1's rows,
// the BOOKMARK that ends them, then live events of c1 only.
func testRESTWatchList(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	env := newRESTEnv(t, db, restEnvOptions{})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 3})
	must(t, writer.Seed(ctx, 4))
	rows, _ := rowItems(t, db, testenv.Pods.GVR, "c1", "")
	if len(rows) == 0 {
		t.Fatal("the seed wrote no pod in c1")
	}

	sendInitialEvents := true
	c1pods := env.ClusterClient(t, "c1").Resource(testenv.Pods.GVR)
	w, err := c1pods.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    &sendInitialEvents,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	must(t, err)
	defer w.Stop()
	var initial []restItem
	var initialRVs []string
	var end restEvent
	for {
		e := nextEvent(t, w)
		if e.Type == watch.Bookmark {
			end = e
			break
		}
		if e.Type != watch.Added {
			t.Fatalf("got %v among the initial events, want ADDED", e)
		}
		initial = append(initial, e.Item)
		initialRVs = append(initialRVs, e.RV)
	}
	if end.Obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("the first bookmark is not annotated %s: %v", metav1.InitialEventsAnnotationKey, end.Obj.GetAnnotations())
	}
	stateRV := end.RV
	rvNumber(t, stateRV)
	for i, rv := range initialRVs {
		if rv != stateRV {
			t.Errorf("initial event %v has RV %s, the end bookmark %s", initial[i], rv, stateRV)
		}
	}
	sortItems(initial)
	if fmt.Sprint(initial) != fmt.Sprint(rows) {
		t.Fatalf("the initial events are not c1's rows:\n got  %v\n want %v", initial, rows)
	}

	// Live events, of c1 only.
	p := precise{t, ctx, db, writer, testenv.Pods}
	added := p.put("c1", "default", "rest-live", watch.Added)
	p.put("c2", "default", "rest-live", watch.Added) // another cluster: not this watch's
	modified := p.put("c1", "default", "rest-live", watch.Modified)
	p.put("c2", "default", "rest-live", watch.Modified)
	deleted := p.delete("c1", "default", "rest-live")
	expectEvents(t, w, stateRV, added, modified, deleted)
}

// testRESTExpired: a watch from an RV walwatch no longer retains (its 1 MiB
// event log wrote past it) is an ERROR event whose Status is 410 Expired.
func testRESTExpired(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	env := newRESTEnv(t, db, restEnvOptions{Walwatch: testenv.WalwatchOptions{MaxLogBytes: "1Mi"}})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 4, Resources: []testenv.Resource{testenv.Pods}, Pad: 60000})
	must(t, writer.Seed(ctx, 2))
	pods := env.Client.Resource(testenv.Pods.GVR)
	list, err := pods.List(ctx, metav1.ListOptions{})
	must(t, err)
	listRV := list.GetResourceVersion()
	rvNumber(t, listRV)

	// Write pods of 60 KB until walwatch's log has let go of the events
	// after the list: each round writes 20 (1.2 MB), then watches.
	for round := 1; ; round++ {
		if round > 30 {
			t.Fatalf("a watch from %s still streams after %d MB of pods were written into a 1 MiB log", listRV, round-1)
		}
		for i := 0; i < 20; i++ {
			must(t, writer.Put(ctx, testenv.Pods, "c1", "default", fmt.Sprintf("rest-big-%d", i%5), nil))
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: listRV})
		must(t, err)
		e := nextEvent(t, w)
		w.Stop()
		if e.Type != watch.Error {
			continue // still retained
		}
		if !apierrors.IsResourceExpired(e.Err) {
			t.Fatalf("a watch from an RV no longer retained: %v, want 410 Expired", e.Err)
		}
		t.Logf("after %d rounds: %v", round, e.Err)
		return
	}
}

// testRESTTooLargeAndLagging: an RV above walwatch's is a 504 with cause
// ResourceVersionTooLarge, for a list and (as an ERROR event, since
// Clusterpedia drops the storage's error) for a watch. And a walwatch that
// lags behind the database (its connections to it stalled by a proxy) makes
// a watch or a list at an RV it has not reached answer 504 within the
// apiserver's request timeout (60 s; a slower answer is cut by the generic
// apiserver's timeout filter, while the storage goes on waiting), not hang;
// once walwatch catches up, the list at that RV is served. Each check reads
// the server's first answer (env.FirstAnswer): client-go would repeat a 504
// with Retry-After up to 10 times, multiplying any wait by 11.
func testRESTTooLargeAndLagging(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	proxy := testenv.NewProxy(t, db.Addr())
	env := newRESTEnv(t, db, restEnvOptions{
		Walwatch: testenv.WalwatchOptions{
			ViaProxy: proxy,
			Args:     []string{"--too-large-rv-wait=1s"},
		},
		// The bound on a list's wait for walwatch's handoff: the cut-off
		// case below waits for it.
		HandoffTimeout: 5 * time.Second,
	})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 5})
	must(t, writer.Seed(ctx, 2))
	// The first answer of each request: client-go would ask again on a 504
	// with Retry-After, up to 10 times.
	deployments := env.FirstAnswer.Resource(testenv.Deployments.GVR)
	list, err := deployments.List(ctx, metav1.ListOptions{})
	must(t, err)
	far := strconv.FormatUint(rvNumber(t, list.GetResourceVersion())+1_000_000_000_000, 10)

	checkTooLarge := func(what string, err error) {
		t.Helper()
		if !genericstorage.IsTooLargeResourceVersion(err) || statusCode(err) != 504 {
			t.Fatalf("%s: %v (code %d), want 504 with cause ResourceVersionTooLarge", what, err, statusCode(err))
		}
	}
	w, err := deployments.Watch(ctx, metav1.ListOptions{ResourceVersion: far})
	must(t, err)
	checkTooLarge("a watch from "+far, errorEvent(t, w))
	w.Stop()
	_, err = deployments.List(ctx, metav1.ListOptions{ResourceVersion: far})
	checkTooLarge("a list at "+far, err)

	// walwatch's stream lags (its replication connection stalls); the
	// database goes on, and stays reachable for walwatch's handoffs.
	env.Walwatch.StallStream(t, db, proxy)
	must(t, writer.Put(ctx, testenv.Deployments, "c1", "default", "rest-lag", nil))
	newRV := databaseRV(t, db)

	w, err = deployments.Watch(ctx, metav1.ListOptions{ResourceVersion: newRV})
	must(t, err)
	checkTooLarge("a watch from "+newRV+" while walwatch lags", errorEvent(t, w))
	w.Stop()

	const requestTimeout = 60 * time.Second // the apiserver's --request-timeout
	listAt := func(what string, want func(error) bool) {
		t.Helper()
		answered := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := deployments.List(ctx, metav1.ListOptions{ResourceVersion: newRV})
			answered <- err
		}()
		select {
		case err := <-answered:
			if !want(err) {
				t.Errorf("a list at %s %s: %v (code %d after %v)", newRV, what, err, statusCode(err), time.Since(start).Round(time.Second))
			}
		case <-time.After(requestTimeout):
			t.Errorf("a list at %s %s: no answer within the apiserver's request timeout (%v)", newRV, what, requestTimeout)
		}
	}
	listAt("while walwatch lags, want 504 with cause ResourceVersionTooLarge", func(err error) bool {
		return genericstorage.IsTooLargeResourceVersion(err) && statusCode(err) == 504
	})

	// walwatch cut off from its database altogether (every connection
	// stalled): the list still gets an answer in time, a 5xx to retry.
	proxy.Pause()
	listAt("while walwatch cannot reach its database, want 503 or 504", func(err error) bool {
		code := statusCode(err)
		return code == 503 || code == 504
	})

	// walwatch catches up: the list at newRV holds the write.
	proxy.Resume()
	deadline := time.Now().Add(eventBound)
	for {
		list, err := deployments.List(ctx, metav1.ListOptions{ResourceVersion: newRV})
		if err == nil {
			if rvNumber(t, list.GetResourceVersion()) < rvNumber(t, newRV) {
				t.Fatalf("a list at %s answered %s", newRV, list.GetResourceVersion())
			}
			found := false
			for _, item := range list.Items {
				found = found || item.GetName() == "rest-lag"
			}
			if !found {
				t.Fatalf("the list at %s lacks the write made before it", list.GetResourceVersion())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a list at %s once walwatch runs again: %v", newRV, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// databaseRV is the database's current position as a walwatch RV (see
// PROTOCOL.md, resourceVersion): every transaction committed so far lies at
// or below it.
func databaseRV(t *testing.T, db *testenv.DB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if db.Dialect == walwatch.Postgres {
		var lsn string
		must(t, db.SQL.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn))
		hi, lo, _ := strings.Cut(lsn, "/")
		h, err1 := strconv.ParseUint(hi, 16, 32)
		l, err2 := strconv.ParseUint(lo, 16, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("LSN %q", lsn)
		}
		return strconv.FormatUint(h<<32|l, 10)
	}
	var file, position, doDB, ignoreDB sql.NullString
	var serverID uint64
	must(t, db.SQL.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&file, &position, &doDB, &ignoreDB))
	must(t, db.SQL.QueryRowContext(ctx, "SELECT @@server_id").Scan(&serverID))
	dot := strings.LastIndexByte(file.String, '.')
	n, err1 := strconv.ParseUint(file.String[dot+1:], 10, 64)
	pos, err2 := strconv.ParseUint(position.String, 10, 64)
	if dot < 0 || err1 != nil || err2 != nil {
		t.Fatalf("SHOW MASTER STATUS: %q %q", file.String, position.String)
	}
	return strconv.FormatUint(serverID%1844*10_000_000_000_000_000+n*10_000_000_000+pos, 10)
}

// testRESTUnsupportedOptions: what the storage cannot serve exactly is a
// 400 with a clear message: on a list the answer, on a watch (Clusterpedia
// drops the storage's error) the stream's ERROR event.
func testRESTUnsupportedOptions(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	env := newRESTEnv(t, db, restEnvOptions{})
	writer := restWriter(t, db, testenv.WriterConfig{Seed: 6})
	must(t, writer.Seed(ctx, 1))

	badRequest := func(what string, err error, words ...string) {
		t.Helper()
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("%s: %v, want 400 BadRequest", what, err)
		}
		for _, word := range words {
			if !strings.Contains(err.Error(), word) {
				t.Fatalf("%s: %q does not say %q", what, err.Error(), word)
			}
		}
	}
	watchError := func(r dynamic.ResourceInterface, opts metav1.ListOptions) error {
		t.Helper()
		w, err := r.Watch(ctx, opts)
		must(t, err) // served: the error is the stream's
		defer w.Stop()
		return errorEvent(t, w)
	}
	owner := metav1.ListOptions{LabelSelector: internal.SearchLabelOwnerUID + "=0f6c4a1e-4d7b-4c43-9a36-2b1f1bfe4f2a"}
	c1pods := env.ClusterClient(t, "c1").Resource(testenv.Pods.GVR)
	badRequest("a watch of one cluster's pods by owner", watchError(c1pods, owner), "owner")
	_, err := env.Client.Resource(testenv.Pods.GVR).List(ctx, owner)
	badRequest("a list by owner without a cluster", err, "cluster")
	if _, err := c1pods.List(ctx, owner); err != nil {
		t.Fatalf("a list of one cluster's pods by owner: %v", err)
	}

	gt := metav1.ListOptions{LabelSelector: "generation>3"}
	deployments := env.Client.Resource(testenv.Deployments.GVR).Namespace("default")
	_, err = deployments.List(ctx, gt)
	badRequest("a list with a label selector gt", err, "generation>3", "gt")
	badRequest("a watch with a label selector gt", watchError(deployments, gt), "generation>3", "gt")
}

// testRESTVerbs: the verbs Clusterpedia's discovery shows for every
// resource hold watch (and get and list).
func testRESTVerbs(t *testing.T, db *testenv.DB) {
	t.Parallel()
	typ := "postgres"
	if db.Dialect == walwatch.MySQL {
		typ = "mysql"
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf("type: %s\ndsn: %s\n", typ, strconv.Quote(db.DSN))))
	must(t, err)
	f, err := New(cfg, nil)
	must(t, err)
	defer f.Shutdown()
	verbs := map[string]bool{}
	for _, v := range f.GetSupportedRequestVerbs() {
		verbs[v] = true
	}
	for _, v := range []string{"get", "list", "watch"} {
		if !verbs[v] {
			t.Errorf("GetSupportedRequestVerbs() = %v: no %s", f.GetSupportedRequestVerbs(), v)
		}
	}
}
