package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WriterConfig configures a Writer. The zero value writes the default mix.
type WriterConfig struct {
	// Seed seeds the writer's choices: the same seed gives the same
	// sequence of writes, as long as the statements succeed alike.
	Seed int64
	// Clusters are the member clusters written (the cluster column).
	// Default: c1, c2, c3.
	Clusters []string
	// Resources are the resource types written. Default: DefaultResources().
	Resources []Resource
	// Hot is the resource most writes go to (about 70% of Step's, as pods
	// dominate a real cluster's churn); it must be one of Resources.
	// Default: pods.
	Hot schema.GroupVersionResource
	// Namespaces are those of namespaced objects. Default: default,
	// kube-system, team-a, team-b.
	Namespaces []string
	// Pad is the bytes of padding per object (PaddingAnnotation), on top of
	// its few hundred bytes of Kubernetes fields. 0: 300; negative: none.
	// Above about 2 KB PostgreSQL stores the object out of line (TOAST), and
	// the event recording's UPDATE then leaves it out of the WAL.
	Pad int
	// RemoveClusters lets Step remove a whole cluster now and then: one
	// DELETE WHERE cluster = ?, as Clusterpedia's CleanCluster does, after
	// which the next Steps add its objects back one INSERT at a time, as the
	// re-added cluster's re-list does.
	RemoveClusters bool
	// TolerateErrors keeps RunInBackground writing after a failed write (a
	// database restarting under it), retrying every 100 ms; see
	// RunInBackground.
	TolerateErrors bool
	// Logf, if set, gets one line per write (t.Logf, for a test that must
	// show what it wrote).
	Logf func(format string, args ...any)
}

// Writer writes Clusterpedia-shaped rows into a DB's `resources` table:
// exactly the statements Clusterpedia's collector has GORM send on that
// dialect, one autocommit statement per write (see store.go), with
// Kubernetes-like objects. It keeps a model of what the table holds, so
// that its updates and deletes address existing rows.
//
// A Writer is safe for concurrent use; its writes are serialized, so Put
// and Delete may be called while RunInBackground runs.
//
// A write that fails (a database restarting under it) is returned as it
// is, and leaves the model as it was before the write. Whether the
// statement committed is unknown, so the table may differ from the model
// until the object's next write; the writer's statements are of the kinds
// that cope (an INSERT of an existing row becomes its UPDATE, an UPDATE or
// DELETE of a missing row changes nothing).
type Writer struct {
	store  store
	cfg    WriterConfig
	hot    int // index of the hot resource in cfg.Resources, or -1
	order  map[string]int
	writes atomic.Int64
	failed atomic.Int64

	mu        sync.Mutex
	rnd       *rand.Rand
	clusterRV map[string]uint64
	objects   map[objectKey]*object
	groups    map[groupKey][]*object // the objects of one resource in one cluster, in a stable order
	readd     []*object              // a removed cluster's objects, to add back
	target    int                    // objects per resource and cluster the mix keeps about
}

// groupKey is one resource of one cluster.
type groupKey struct{ cluster, gvr string }

var (
	defaultClusters   = []string{"c1", "c2", "c3"}
	defaultNamespaces = []string{"default", "kube-system", "team-a", "team-b"}
	apps              = []string{"web", "api", "worker", "cache", "gateway", "billing", "search", "auth", "metrics", "frontend"}
)

// NewWriter returns a Writer on db's table, with cfg's defaults filled in.
// It writes nothing yet.
func NewWriter(db *DB, cfg WriterConfig) *Writer {
	if len(cfg.Clusters) == 0 {
		cfg.Clusters = defaultClusters
	}
	if len(cfg.Resources) == 0 {
		cfg.Resources = DefaultResources()
	}
	if cfg.Hot.Resource == "" {
		cfg.Hot = Pods.GVR
	}
	if len(cfg.Namespaces) == 0 {
		cfg.Namespaces = defaultNamespaces
	}
	if cfg.Pad == 0 {
		cfg.Pad = 300
	}
	w := &Writer{
		store:     store{db: db.SQL, dialect: db.Dialect},
		cfg:       cfg,
		hot:       -1,
		order:     map[string]int{},
		rnd:       rand.New(rand.NewSource(cfg.Seed)),
		clusterRV: map[string]uint64{},
		objects:   map[objectKey]*object{},
		groups:    map[groupKey][]*object{},
		target:    4,
	}
	for i, r := range cfg.Resources {
		w.order[r.GVR.String()] = i
		if r.GVR == cfg.Hot {
			w.hot = i
		}
	}
	for i, c := range cfg.Clusters {
		// Member clusters' RVs are their own, far apart, as real ones are.
		w.clusterRV[c] = 100000*uint64(i+1) + uint64(w.rnd.Intn(10000))
	}
	return w
}

// Writes is how many statements changed the table so far (a failed INSERT
// that the writer followed with its UPDATE counts once).
func (w *Writer) Writes() int64 { return w.writes.Load() }

// WaitWrites waits until the writer, running in the background, has made n
// more writes than when it was called: a position of the writer, not a
// time. It fails t if that takes more than bound.
func (w *Writer) WaitWrites(t testing.TB, n int64, bound time.Duration) {
	t.Helper()
	target := w.Writes() + n
	deadline := time.Now().Add(bound)
	for w.Writes() < target {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: the writer wrote %d, not %d, within %s", w.Writes(), target, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Failures is how many writes failed so far.
func (w *Writer) Failures() int64 { return w.failed.Load() }

// Seed writes perResourceAndCluster new objects of every resource in every
// cluster, owners first (Resources' order), one INSERT each, and makes
// that the number of objects per resource and cluster that Step's mix
// keeps about (default 4).
func (w *Writer) Seed(ctx context.Context, perResourceAndCluster int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if perResourceAndCluster > 0 {
		w.target = perResourceAndCluster
	}
	for _, cluster := range w.cfg.Clusters {
		for _, r := range w.cfg.Resources {
			for i := 0; i < perResourceAndCluster; i++ {
				o := w.newObject(r, cluster, "", "")
				if err := w.insert(ctx, o, "SEED"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Steps runs Step n times, and stops at the first error.
func (w *Writer) Steps(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		if err := w.Step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Step makes one write of the collector's mix, on the hot resource about
// 70% of the time, else on another resource, in a random cluster. With
// about the target number of objects of that resource in that cluster, the
// shares are:
//   - a new object, INSERT: 16% (more below the target); a name already
//     taken makes it a DELETE of the old object, or the collector's re-list
//     of it (below);
//   - a change, UPDATE of created_at, object, owner_uid, resource_version,
//     uid, synced_at WHERE the six keys: 43%, a quarter of them with new
//     labels (a label selector sees the object enter or leave);
//   - an event recorded, UPDATE of events and event_resource_versions WHERE
//     cluster AND uid, the object unchanged: 18%;
//   - a delete, DELETE WHERE the six keys: 9% (more above the target);
//   - a re-create, which the collector folds into one UPDATE with a new
//     uid: 5%;
//   - a graceful deletion's start, the UPDATE that also sets deleted_at,
//     with metadata.deletionTimestamp: 6%;
//   - a re-list of an existing object (the collector restarted): an INSERT
//     that fails on the unique index, then the UPDATE: 3%;
//   - with RemoveClusters, one Step in 250 removes a cluster (DELETE WHERE
//     cluster = ?), and the following Steps add its objects back, one
//     INSERT each, before anything else.
func (w *Writer) Step(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.readd) > 0 {
		o := w.readd[0]
		w.readd = w.readd[1:]
		if err := w.insert(ctx, o, "READD"); err != nil {
			w.readd = append([]*object{o}, w.readd...) // try it again next time
			return err
		}
		return nil
	}
	if w.cfg.RemoveClusters && w.writes.Load() > 40 && w.rnd.Intn(250) == 0 {
		return w.removeCluster(ctx)
	}
	r := w.pickResource()
	cluster := w.cfg.Clusters[w.rnd.Intn(len(w.cfg.Clusters))]
	group := w.groups[groupKey{cluster, r.GVR.String()}]
	n := len(group)

	const (
		opInsert = iota
		opUpdate
		opEvent
		opDelete
		opRecreate
		opTerminate
		opReadd
	)
	weights := [][2]int{{opInsert, 12}}
	if n < w.target {
		weights[0][1] = 45
	}
	if n > 0 {
		del := 7
		if n > w.target {
			del = 30
		}
		weights = append(weights, [2]int{opUpdate, 33}, [2]int{opEvent, 14}, [2]int{opDelete, del},
			[2]int{opRecreate, 4}, [2]int{opTerminate, 5}, [2]int{opReadd, 2})
	}
	total := 0
	for _, wt := range weights {
		total += wt[1]
	}
	roll := w.rnd.Intn(total)
	op := opInsert
	for _, wt := range weights {
		if roll < wt[1] {
			op = wt[0]
			break
		}
		roll -= wt[1]
	}
	if op == opInsert {
		return w.insertNew(ctx, r, cluster)
	}
	o := group[w.rnd.Intn(n)]
	switch op {
	case opUpdate:
		return w.modify(ctx, o)
	case opEvent:
		return w.recordEvent(ctx, o)
	case opDelete:
		return w.remove(ctx, o)
	case opRecreate:
		return w.recreate(ctx, o)
	case opTerminate:
		return w.terminate(ctx, o)
	default:
		return w.relist(ctx, o)
	}
}

// RunInBackground writes Steps in a goroutine of its own, at rate writes
// per second (0: as fast as it can; after a stall it does not burst to
// catch up), until stop is called or ctx is done. stop waits for the step
// in flight, and returns:
//   - without TolerateErrors, the first error; the writer stopped there;
//   - with TolerateErrors, where the writer kept going (every 100 ms while
//     writes fail), the error of its last write if that failed, else nil:
//     a database that never came back is an error, one that restarted is
//     not.
//
// Errors of writes that ctx's end interrupted are not errors. stop may be
// called more than once.
func (w *Writer) RunInBackground(ctx context.Context, rate int) (stop func() error) {
	stopped := make(chan struct{})
	done := make(chan struct{})
	var result error
	go func() {
		defer close(done)
		var period time.Duration
		if rate > 0 {
			period = time.Second / time.Duration(rate)
		}
		next := time.Now()
		wait := func(d time.Duration) bool {
			if d <= 0 {
				select {
				case <-stopped:
					return false
				case <-ctx.Done():
					return false
				default:
					return true
				}
			}
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-stopped:
				return false
			case <-ctx.Done():
				return false
			case <-timer.C:
				return true
			}
		}
		for wait(0) {
			err := w.Step(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				result = err
				if !w.cfg.TolerateErrors {
					return
				}
				if !wait(100 * time.Millisecond) {
					return
				}
				continue
			}
			result = nil
			if period > 0 {
				next = next.Add(period)
				if now := time.Now(); next.Before(now.Add(-time.Second)) {
					next = now
				}
				if !wait(time.Until(next)) {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() error {
		once.Do(func() {
			close(stopped)
			<-done
		})
		return result
	}
}

// Put writes one named object: an UPDATE if the writer wrote it before (a
// new resourceVersion and spec; labels, if not nil, replace its labels),
// else an INSERT (labels nil: random ones); either way the row exists
// afterwards. namespace must be "" exactly when r is cluster-scoped.
func (w *Writer) Put(ctx context.Context, r Resource, cluster, namespace, name string, labels map[string]string) error {
	if err := checkScope(r, namespace); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := objectKey{cluster: cluster, gvr: r.GVR.String(), namespace: namespace, name: name}
	w.dropReadd(key)
	if o, ok := w.objects[key]; ok {
		old := *o
		if labels != nil {
			o.labels = copyLabels(labels)
		}
		o.gen++
		o.rv = w.nextRV(cluster)
		rows, err := w.update(ctx, o, "PUT")
		if err != nil {
			*o = old
			return err
		}
		if rows > 0 {
			return nil
		}
		w.forget(o) // the table lost it (a failed write): add it again
		return w.insert(ctx, o, "PUT")
	}
	o := w.newObject(r, cluster, namespace, name)
	if labels != nil {
		o.labels = copyLabels(labels)
	}
	return w.insert(ctx, o, "PUT")
}

// Delete deletes one named object: DELETE WHERE the six keys. A row the
// table does not hold is not an error (the statement changes nothing).
func (w *Writer) Delete(ctx context.Context, r Resource, cluster, namespace, name string) error {
	if err := checkScope(r, namespace); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := objectKey{cluster: cluster, gvr: r.GVR.String(), namespace: namespace, name: name}
	w.dropReadd(key)
	rows, err := w.store.delete(ctx, r, cluster, namespace, name)
	if err != nil {
		return w.fail("DELETE", err)
	}
	w.writes.Add(1)
	if o, ok := w.objects[key]; ok {
		w.forget(o)
	}
	w.logf("DELETE %s %s/%s/%s rows=%d", r.GVR.Resource, cluster, namespace, name, rows)
	return nil
}

func checkScope(r Resource, namespace string) error {
	if r.Namespaced && namespace == "" {
		return fmt.Errorf("testenv: %s is namespaced: give a namespace", r.GVR)
	}
	if !r.Namespaced && namespace != "" {
		return fmt.Errorf("testenv: %s is cluster-scoped: its namespace must be empty", r.GVR)
	}
	return nil
}

func copyLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// --- the model ---------------------------------------------------------------

func (w *Writer) pickResource() Resource {
	rs := w.cfg.Resources
	if w.hot >= 0 && (len(rs) == 1 || w.rnd.Intn(10) < 7) {
		return rs[w.hot]
	}
	for {
		i := w.rnd.Intn(len(rs))
		if i != w.hot || len(rs) == 1 {
			return rs[i]
		}
	}
}

func (w *Writer) nextRV(cluster string) uint64 {
	if _, ok := w.clusterRV[cluster]; !ok {
		w.clusterRV[cluster] = 100000 * uint64(len(w.clusterRV)+1)
	}
	w.clusterRV[cluster]++
	return w.clusterRV[cluster]
}

func (w *Writer) add(o *object) {
	w.objects[o.key()] = o
	g := groupKey{o.cluster, o.res.GVR.String()}
	w.groups[g] = append(w.groups[g], o)
}

func (w *Writer) forget(o *object) {
	delete(w.objects, o.key())
	g := groupKey{o.cluster, o.res.GVR.String()}
	list := w.groups[g]
	for i, x := range list {
		if x == o {
			list[i] = list[len(list)-1]
			w.groups[g] = list[:len(list)-1]
			break
		}
	}
}

func (w *Writer) dropReadd(key objectKey) {
	for i, o := range w.readd {
		if o.key() == key {
			w.readd = append(w.readd[:i], w.readd[i+1:]...)
			return
		}
	}
}

const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789" // Kubernetes' generated-name suffixes

func (w *Writer) alnum(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[w.rnd.Intn(len(alphabet))]
	}
	return string(b)
}

func (w *Writer) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(w.rnd.Intn(256))
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 1
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (w *Writer) pick(list []string) string { return list[w.rnd.Intn(len(list))] }

// owner picks a controller for a new object of r: pods belong to a
// ReplicaSet, ReplicaSets to a Deployment, of the same cluster, when the
// writer has one (and mostly then).
func (w *Writer) owner(r Resource, cluster string) *object {
	var kind string
	switch r.GVR {
	case Pods.GVR:
		kind = ReplicaSets.GVR.String()
	case ReplicaSets.GVR:
		kind = Deployments.GVR.String()
	default:
		return nil
	}
	candidates := w.groups[groupKey{cluster, kind}]
	if len(candidates) == 0 || w.rnd.Intn(10) == 0 {
		return nil
	}
	return candidates[w.rnd.Intn(len(candidates))]
}

// newObject makes a new object of r in cluster, not yet written. An empty
// namespace or name is chosen: names come from small sets, as a cluster's
// do, so that names get reused.
func (w *Writer) newObject(r Resource, cluster, namespace, name string) *object {
	o := &object{
		res:     r,
		cluster: cluster,
		uid:     w.uuid(),
		created: time.Now().UTC().Truncate(time.Second),
		gen:     1,
		app:     w.pick(apps),
		node:    fmt.Sprintf("node-%d", 1+w.rnd.Intn(5)),
		podIP:   fmt.Sprintf("10.244.%d.%d", w.rnd.Intn(16), 2+w.rnd.Intn(250)),
	}
	if w.cfg.Pad > 0 {
		o.pad = w.alnum(w.cfg.Pad, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
	}
	if r.Namespaced {
		o.namespace = w.pick(w.cfg.Namespaces)
	}
	if owner := w.owner(r, cluster); owner != nil && name == "" {
		o.owner = &ownerRef{apiVersion: owner.res.APIVersion(), kind: owner.res.Kind, name: owner.name, uid: owner.uid}
		o.namespace = owner.namespace
		o.app = owner.app
		if r.GVR == Pods.GVR {
			o.name = owner.name + "-" + w.alnum(5, nameAlphabet)
		} else {
			o.name = owner.name + "-" + w.alnum(10, nameAlphabet)
		}
	} else {
		switch r.GVR {
		case Pods.GVR:
			o.name = o.app + "-" + w.alnum(5, nameAlphabet)
		case Namespaces.GVR:
			// A new slice: appending to cfg's could write into the caller's array.
			names := append([]string{"ns-1", "ns-2", "ns-3", "ns-4", "ns-5", "ns-6"}, w.cfg.Namespaces...)
			o.name = w.pick(names)
		case Nodes.GVR:
			o.name = fmt.Sprintf("node-%d", 1+w.rnd.Intn(8))
		default:
			o.name = fmt.Sprintf("%s-%d", o.app, 1+w.rnd.Intn(12))
		}
	}
	if name != "" {
		o.name = name
	}
	if namespace != "" {
		o.namespace = namespace
	}
	o.labels = map[string]string{
		"app":  o.app,
		"tier": w.pick([]string{"frontend", "backend"}),
		"env":  w.pick([]string{"prod", "staging"}),
	}
	if o.owner != nil && r.GVR == Pods.GVR {
		o.labels["pod-template-hash"] = o.owner.name[strings.LastIndexByte(o.owner.name, '-')+1:]
	}
	o.rv = w.nextRV(cluster)
	return o
}

// --- the writes ----------------------------------------------------------------

func (w *Writer) logf(format string, args ...any) {
	if w.cfg.Logf != nil {
		w.cfg.Logf("writer: "+format, args...)
	}
}

func (w *Writer) fail(what string, err error) error {
	w.failed.Add(1)
	return fmt.Errorf("testenv: writer: %s: %w", what, err)
}

func describe(o *object) string {
	return fmt.Sprintf("%s %s/%s/%s", o.res.GVR.Resource, o.cluster, o.namespace, o.name)
}

// insert is the collector's createOrUpdateResource: INSERT, and on a unique
// violation the UPDATE.
func (w *Writer) insert(ctx context.Context, o *object, label string) error {
	object := o.json()
	err := w.store.insert(ctx, o, object, time.Now())
	if errors.Is(err, errDuplicate) {
		w.add(o)
		if _, err := w.update(ctx, o, label+"->UPDATE"); err != nil {
			w.forget(o)
			return err
		}
		return nil
	}
	if err != nil {
		return w.fail("INSERT "+describe(o), err)
	}
	o.written = object
	w.writes.Add(1)
	w.add(o)
	w.logf("%s %s uid=%s", label, describe(o), o.uid)
	return nil
}

// update writes o's current state with the collector's UPDATE; it
// returns the rows changed.
func (w *Writer) update(ctx context.Context, o *object, label string) (int64, error) {
	object := o.json()
	rows, err := w.store.update(ctx, o, object, time.Now())
	if err != nil {
		return 0, w.fail("UPDATE "+describe(o), err)
	}
	o.written = object
	w.writes.Add(1)
	w.logf("%s %s rows=%d", label, describe(o), rows)
	return rows, nil
}

// insertNew adds a new object; a name already taken deletes the old
// object first (the collector sees a new object of a name only after the
// old one is gone), or replays the collector's re-list of it.
func (w *Writer) insertNew(ctx context.Context, r Resource, cluster string) error {
	o := w.newObject(r, cluster, "", "")
	if old, ok := w.objects[o.key()]; ok {
		if w.rnd.Intn(2) == 0 {
			return w.remove(ctx, old)
		}
		return w.relist(ctx, old)
	}
	return w.insert(ctx, o, "INSERT")
}

// relist is an ADDED of an object the table holds, as after the
// collector's restart: the INSERT fails on the unique index, and the
// UPDATE follows.
func (w *Writer) relist(ctx context.Context, o *object) error {
	old := *o
	w.forget(o)
	o.gen++
	o.rv = w.nextRV(o.cluster)
	if err := w.insert(ctx, o, "RELIST"); err != nil {
		*o = old
		w.add(o)
		return err
	}
	return nil
}

func (w *Writer) modify(ctx context.Context, o *object) error {
	old := *o
	o.gen++
	o.rv = w.nextRV(o.cluster)
	if w.rnd.Intn(4) == 0 {
		// New labels: a watch's label selector sees the object enter or
		// leave.
		o.labels = copyLabels(o.labels)
		if w.rnd.Intn(2) == 0 {
			o.labels["tier"] = w.pick([]string{"frontend", "backend"})
		} else {
			o.labels["env"] = w.pick([]string{"prod", "staging"})
		}
	}
	if _, err := w.update(ctx, o, "UPDATE"); err != nil {
		*o = old
		return err
	}
	return nil
}

func (w *Writer) recordEvent(ctx context.Context, o *object) error {
	reasons := [][2]string{
		{"Scheduled", "Successfully assigned pod to node"},
		{"Pulled", "Container image already present on machine"},
		{"Started", "Started container"},
		{"BackOff", "Back-off restarting failed container"},
		{"Sync", "Synced"},
	}
	reason := reasons[w.rnd.Intn(len(reasons))]
	name := o.name + "." + w.alnum(16, "0123456789abcdef")
	uid := w.uuid()
	rv := w.nextRV(o.cluster)
	namespace := o.namespace
	if namespace == "" {
		namespace = "default"
	}
	event := eventJSON(o, name, uid, reason[0], reason[1], rv, time.Now())
	rows, err := w.store.recordEvent(ctx, o.cluster, o.uid, namespace+"/"+name, rv, uid, event)
	if err != nil {
		return w.fail("event UPDATE "+describe(o), err)
	}
	w.writes.Add(1)
	w.logf("EVENT %s %s rows=%d", describe(o), reason[0], rows)
	return nil
}

func (w *Writer) remove(ctx context.Context, o *object) error {
	rows, err := w.store.delete(ctx, o.res, o.cluster, o.namespace, o.name)
	if err != nil {
		return w.fail("DELETE "+describe(o), err)
	}
	w.writes.Add(1)
	w.forget(o)
	w.logf("DELETE %s rows=%d", describe(o), rows)
	return nil
}

// recreate is the collector's queue folding Deleted then Added of one name
// into one UPDATE that carries the new object, with a new uid.
func (w *Writer) recreate(ctx context.Context, o *object) error {
	old := *o
	o.uid = w.uuid()
	o.created = time.Now().UTC().Truncate(time.Second)
	o.deleting = nil
	o.gen = 1
	o.podIP = fmt.Sprintf("10.244.%d.%d", w.rnd.Intn(16), 2+w.rnd.Intn(250))
	o.rv = w.nextRV(o.cluster)
	if _, err := w.update(ctx, o, "RECREATE"); err != nil {
		*o = old
		return err
	}
	return nil
}

// terminate starts a graceful deletion: metadata.deletionTimestamp, and
// the UPDATE that also sets deleted_at. A later DELETE removes the object.
func (w *Writer) terminate(ctx context.Context, o *object) error {
	if o.deleting != nil {
		return w.modify(ctx, o)
	}
	at := time.Now().UTC().Truncate(time.Second).Add(30 * time.Second)
	o.deleting = &at
	o.rv = w.nextRV(o.cluster)
	if _, err := w.update(ctx, o, "TERMINATE"); err != nil {
		o.deleting = nil
		return err
	}
	return nil
}

// removeCluster is Clusterpedia's CleanCluster: one DELETE of every row of
// a cluster. Its objects are queued to be added back, owners first, as the
// re-added cluster's informers list them.
func (w *Writer) removeCluster(ctx context.Context) error {
	cluster := w.cfg.Clusters[w.rnd.Intn(len(w.cfg.Clusters))]
	rows, err := w.store.deleteCluster(ctx, cluster)
	if err != nil {
		return w.fail("DELETE cluster "+cluster, err)
	}
	w.writes.Add(1)
	var gone []*object
	for _, list := range w.groups {
		for _, o := range list {
			if o.cluster == cluster {
				gone = append(gone, o)
			}
		}
	}
	sort.Slice(gone, func(i, j int) bool {
		a, b := gone[i], gone[j]
		if oa, ob := w.order[a.res.GVR.String()], w.order[b.res.GVR.String()]; oa != ob {
			return oa < ob
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	for _, o := range gone {
		w.forget(o)
	}
	w.readd = append(w.readd, gone...)
	w.logf("DELETE-CLUSTER %s rows=%d (re-adding %d objects)", cluster, rows, len(gone))
	return nil
}
