package testenv

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

func TestWriterPostgres(t *testing.T) { testWriter(t, NewPostgres(t)) }

func TestWriterMariaDB(t *testing.T) { testWriter(t, NewMariaDB(t)) }

// testWriter runs every kind of write the writer has, then checks that the
// table holds what the writer's model says, and that every row is one
// Clusterpedia could have written.
func testWriter(t *testing.T, db *DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	ops := map[string]int{}
	w := NewWriter(db, WriterConfig{
		Seed:           1,
		RemoveClusters: true,
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			op, _, _ := strings.Cut(strings.TrimPrefix(fmt.Sprintf(format, args...), "writer: "), " ")
			ops[op]++
		},
	})
	if err := w.Seed(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := w.Steps(ctx, 300); err != nil {
		t.Fatal(err)
	}
	// A cluster's removal, whether or not the mix drew one, and its re-add.
	w.mu.Lock()
	err := w.removeCluster(ctx)
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for w.pendingReadds() > 0 {
		if err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop := w.RunInBackground(ctx, 0)
	for start := w.Writes(); w.Writes() < start+50; {
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("background writes: %v", err)
	}

	// Precise writes.
	labels := map[string]string{"app": "precise"}
	if err := w.Put(ctx, Pods, "c9", "default", "precise-pod", labels); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, Nodes, "c9", "", "precise-node", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, Pods, "c9", "default", "precise-pod", map[string]string{"app": "precise", "v": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, Nodes, "c9", "", "precise-node"); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, Nodes, "c9", "default", "bad", nil); err == nil {
		t.Error("Put of a cluster-scoped object with a namespace: no error")
	}
	rows, err := SelectRows(ctx, db, Pods.GVR, "c9", "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Name != "precise-pod" {
		t.Fatalf("SelectRows(pods, c9, default) = %v, want precise-pod only", rows)
	}
	var got struct {
		Metadata struct{ Labels map[string]string }
	}
	if err := json.Unmarshal(rows[0].Object, &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"app": "precise", "v": "2"}; !reflect.DeepEqual(got.Metadata.Labels, want) {
		t.Errorf("precise-pod's labels = %v, want %v", got.Metadata.Labels, want)
	}
	if rows, err := SelectRows(ctx, db, Nodes.GVR, "c9", ""); err != nil || len(rows) != 0 {
		t.Errorf("SelectRows(nodes, c9) = %v, %v; want none (deleted)", rows, err)
	}

	// Every kind of write happened.
	for _, op := range []string{"SEED", "INSERT", "UPDATE", "EVENT", "DELETE", "RECREATE", "TERMINATE", "RELIST->UPDATE", "DELETE-CLUSTER", "READD", "PUT"} {
		if ops[op] == 0 {
			t.Errorf("no %s write among %v", op, ops)
		}
	}

	t.Logf("%d writes: %v", w.Writes(), ops)
	checkTableMatchesModel(t, db, w)
}

func (w *Writer) pendingReadds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.readd)
}

// tableRow is every column of a row that the checks read.
type tableRow struct {
	group, version, resource, kind, cluster, namespace, name string
	ownerUID, uid, resourceVersion                           string
	object                                                   string
	events, eventRVs                                         sql.NullString
	deleted                                                  bool
}

func readTable(t *testing.T, db *DB) []tableRow {
	t.Helper()
	q := `SELECT "group", "version", "resource", "kind", "cluster", "namespace", "name", "owner_uid", "uid", "resource_version",
		"object"::text, "events"::text, "event_resource_versions"::text, "deleted_at" IS NOT NULL FROM "resources"`
	if db.Dialect == walwatch.MySQL {
		q = strings.NewReplacer(`"`, "`", "::text", "").Replace(q)
	}
	rs, err := db.SQL.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var rows []tableRow
	for rs.Next() {
		var r tableRow
		if err := rs.Scan(&r.group, &r.version, &r.resource, &r.kind, &r.cluster, &r.namespace, &r.name, &r.ownerUID, &r.uid,
			&r.resourceVersion, &r.object, &r.events, &r.eventRVs, &r.deleted); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// checkTableMatchesModel checks every row against what Clusterpedia's
// collector writes, and the rows against the writer's model: the same
// objects, with the object column the writer wrote last.
func checkTableMatchesModel(t *testing.T, db *DB, w *Writer) {
	t.Helper()
	rows := readTable(t, db)
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d rows", len(rows))
	if len(rows) != len(w.objects) {
		t.Errorf("the table holds %d rows, the writer's model %d objects", len(rows), len(w.objects))
	}
	uids := map[string]bool{}
	for _, r := range rows {
		where := fmt.Sprintf("%s/%s/%s %s/%s/%s", r.group, r.version, r.resource, r.cluster, r.namespace, r.name)
		checkRow(t, where, r)
		if uids[r.cluster+"/"+r.uid] {
			t.Errorf("%s: uid %s twice in cluster %s", where, r.uid, r.cluster)
		}
		uids[r.cluster+"/"+r.uid] = true

		gvr := r.resource + "." + r.version + "." + r.group
		var o *object
		for k, x := range w.objects {
			if k.cluster == r.cluster && k.namespace == r.namespace && k.name == r.name && x.res.GVR.Resource+"."+x.res.GVR.Version+"."+x.res.GVR.Group == gvr {
				o = x
			}
		}
		if o == nil {
			t.Errorf("%s: in the table, not in the writer's model", where)
			continue
		}
		if r.uid != o.uid || r.resourceVersion != rvText(o.rv) || r.ownerUID != o.ownerUID() || r.deleted != (o.deleting != nil) {
			t.Errorf("%s: row uid=%s rv=%s owner=%s deleting=%v, model uid=%s rv=%d owner=%s deleting=%v",
				where, r.uid, r.resourceVersion, r.ownerUID, r.deleted, o.uid, o.rv, o.ownerUID(), o.deleting != nil)
		}
		if !sameJSON(r.object, o.written) {
			t.Errorf("%s: the object column is not what the writer wrote last:\n got %s\nwant %s", where, r.object, o.written)
		}
	}
}

// checkRow checks a row's columns against its object, as Clusterpedia
// fills them.
func checkRow(t *testing.T, where string, r tableRow) {
	t.Helper()
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name              string            `json:"name"`
			Namespace         *string           `json:"namespace"`
			UID               string            `json:"uid"`
			ResourceVersion   string            `json:"resourceVersion"`
			Annotations       map[string]string `json:"annotations"`
			DeletionTimestamp *string           `json:"deletionTimestamp"`
			OwnerReferences   []struct {
				UID        string `json:"uid"`
				Controller bool   `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(r.object), &obj); err != nil {
		t.Errorf("%s: object is not JSON: %v", where, err)
		return
	}
	apiVersion := r.version
	if r.group != "" {
		apiVersion = r.group + "/" + r.version
	}
	m := obj.Metadata
	namespace := ""
	if m.Namespace != nil {
		namespace = *m.Namespace
	}
	controller := ""
	for _, ref := range m.OwnerReferences {
		if ref.Controller {
			controller = ref.UID
		}
	}
	switch {
	case obj.APIVersion != apiVersion, obj.Kind != r.kind:
		t.Errorf("%s: object is %s %s, the row says %s %s", where, obj.APIVersion, obj.Kind, apiVersion, r.kind)
	case m.Name != r.name, namespace != r.namespace, (m.Namespace != nil) != (r.namespace != ""):
		t.Errorf("%s: object is named %v/%s", where, m.Namespace, m.Name)
	case m.UID != r.uid, m.ResourceVersion != r.resourceVersion:
		t.Errorf("%s: object uid %s rv %s, row uid %s rv %s", where, m.UID, m.ResourceVersion, r.uid, r.resourceVersion)
	case m.Annotations[ClusterNameAnnotation] != r.cluster:
		t.Errorf("%s: annotation %s = %q", where, ClusterNameAnnotation, m.Annotations[ClusterNameAnnotation])
	case controller != r.ownerUID:
		t.Errorf("%s: owner_uid %q, controller %q", where, r.ownerUID, controller)
	case (m.DeletionTimestamp != nil) != r.deleted:
		t.Errorf("%s: deletionTimestamp %v, deleted_at set %v", where, m.DeletionTimestamp, r.deleted)
	}
	// The event recording sets one key of each column per event.
	if r.events.Valid != r.eventRVs.Valid {
		t.Errorf("%s: events %v but event_resource_versions %v", where, r.events.Valid, r.eventRVs.Valid)
	}
	if r.events.Valid {
		var events map[string]struct{ Kind string }
		var rvs map[string]uint64
		if err := json.Unmarshal([]byte(r.events.String), &events); err != nil {
			t.Errorf("%s: events: %v", where, err)
		}
		if err := json.Unmarshal([]byte(r.eventRVs.String), &rvs); err != nil {
			t.Errorf("%s: event_resource_versions (numbers): %v", where, err)
		}
		if len(events) != len(rvs) || len(events) == 0 {
			t.Errorf("%s: %d events, %d event RVs", where, len(events), len(rvs))
		}
		for uid, e := range events {
			if e.Kind != "Event" {
				t.Errorf("%s: events[%s] is a %q", where, uid, e.Kind)
			}
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Names are what PostgreSQL and MariaDB accept as names, and slots.
func TestUniqueName(t *testing.T) {
	long := strings.Repeat("TestSomething/with_a_very-long Name", 4)
	a, b := uniqueName("go", long+"1"), uniqueName("go", long+"2")
	for _, name := range []string{a, b, uniqueName("go", "Test/x")} {
		if len(name) > 63 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			t.Errorf("uniqueName = %q: over 63 bytes, or not [a-z0-9_]", name)
		}
	}
	if a == b {
		t.Errorf("two names are the same: %q", a)
	}
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- a comment;\nCREATE TABLE x (\n  a int -- inline\n);\n\n-- another\nCREATE INDEX i ON x (a);\n")
	want := []string{"CREATE TABLE x (\n  a int -- inline\n)", "-- another\nCREATE INDEX i ON x (a)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitStatements = %q, want %q", got, want)
	}
}
