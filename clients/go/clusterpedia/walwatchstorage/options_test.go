package walwatchstorage

// Clusterpedia's own query options, each served exactly or refused with a
// 400, on a list and on a WatchList, through the REST path as a client
// sends them (Clusterpedia's search labels in the labelSelector, its field
// selector syntax). What each must give is computed here from the table's
// rows, in Go: the clusters, namespaces and names, the owner (by uid and by
// name, with seniority), since and before, labels, fields, a fuzzy name,
// orderby, limit and offset, and the remaining count. A WatchList with the
// same options must start with exactly the list's objects, or be refused
// with a 400 where a watch cannot serve the option exactly.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/internal/testenv"
)

func TestRESTPostgresQueryOptions(t *testing.T) { testRESTQueryOptions(t, testenv.NewPostgres(t)) }
func TestRESTMariaDBQueryOptions(t *testing.T)  { testRESTQueryOptions(t, testenv.NewMariaDB(t)) }

// optionRow is what the cases select on, read from one row's object.
type optionRow struct {
	item    restItem
	labels  labels.Set
	owner   string // the controller's uid
	created time.Time
}

func optionRows(t *testing.T, db *testenv.DB, r testenv.Resource) []optionRow {
	t.Helper()
	items, objects := rowItems(t, db, r.GVR, "", "")
	rows := make([]optionRow, 0, len(items))
	for _, item := range items {
		u := unstructured.Unstructured{Object: objects[item]}
		row := optionRow{item: item, labels: u.GetLabels(), created: u.GetCreationTimestamp().Time}
		if ref := metav1.GetControllerOfNoCopy(&u); ref != nil {
			row.owner = string(ref.UID)
		}
		rows = append(rows, row)
	}
	return rows
}

type optionCase struct {
	name     string
	selector string // labelSelector, Clusterpedia's search labels among them
	fields   string // fieldSelector
	want     func(optionRow) bool
	// byName: the list must be ordered by name (desc: descending), and
	// from..to of that order (to 0: the end).
	byName   bool
	desc     bool
	from, to int
	// remaining: the list must carry remainingItemCount.
	remaining bool
	// watch: "" a WatchList with the same options starts with the list's
	// objects; "-" no watch is tried (paging options); else the watch is a
	// 400 whose message holds it.
	watch string
}

func testRESTQueryOptions(t *testing.T, db *testenv.DB) {
	t.Parallel()
	ctx := testContext(t)
	env := newRESTEnv(t, db, restEnvOptions{})
	writer := testenv.NewWriter(db, testenv.WriterConfig{
		Seed:       11,
		Clusters:   []string{"c1", "c2", "c3"},
		Namespaces: []string{"default", "team-a", "team-b"},
		Resources:  []testenv.Resource{testenv.Deployments, testenv.ReplicaSets, testenv.Pods},
	})
	must(t, writer.Seed(ctx, 8))
	// Creation times of two seconds at least (the column's precision), so
	// that since and before split the pods.
	first := time.Now().UTC().Truncate(time.Second)
	for time.Now().UTC().Truncate(time.Second).Equal(first) {
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 4; i++ {
		must(t, writer.Put(ctx, testenv.Pods, "c1", "default", fmt.Sprintf("late-web-%d", i), map[string]string{"app": "web", "tier": "frontend"}))
	}

	pods := optionRows(t, db, testenv.Pods)
	rsets := optionRows(t, db, testenv.ReplicaSets)
	// An owner chain in c1: a ReplicaSet with pods, and its Deployment.
	var rs optionRow
	for _, r := range rsets {
		if r.item.Cluster != "c1" || r.owner == "" {
			continue
		}
		for _, p := range pods {
			if p.owner == r.item.UID {
				rs = r
			}
		}
	}
	if rs.item.UID == "" {
		t.Fatal("the writer made no ReplicaSet in c1 with pods and an owner")
	}
	rsOwnerOf := map[string]string{} // ReplicaSet uid -> Deployment uid, in c1
	rsNamed := map[string]bool{}     // uids of c1's ReplicaSets named as rs
	for _, r := range rsets {
		if r.item.Cluster == "c1" {
			rsOwnerOf[r.item.UID] = r.owner
			if r.item.Name == rs.item.Name {
				rsNamed[r.item.UID] = true
			}
		}
	}
	split := pods[0].created
	for _, p := range pods {
		if p.created.After(split) {
			split = p.created
		}
	}
	someName := pods[len(pods)/2].item.Name
	someApp := pods[len(pods)/3].labels["app"]
	inCluster := func(p optionRow, c ...string) bool {
		for _, x := range c {
			if p.item.Cluster == x {
				return true
			}
		}
		return false
	}

	cases := []optionCase{
		{name: "clusters", selector: "search.clusterpedia.io/clusters in (c1,c3)",
			want: func(p optionRow) bool { return inCluster(p, "c1", "c3") }},
		{name: "namespaces", selector: "search.clusterpedia.io/namespaces in (default,team-b)",
			want: func(p optionRow) bool { return p.item.Namespace == "default" || p.item.Namespace == "team-b" }},
		{name: "names", selector: "search.clusterpedia.io/names in (" + someName + ",late-web-2)",
			want: func(p optionRow) bool { return p.item.Name == someName || p.item.Name == "late-web-2" }},
		{name: "one cluster and one name", selector: "search.clusterpedia.io/clusters=c1,search.clusterpedia.io/names=late-web-1",
			want: func(p optionRow) bool { return inCluster(p, "c1") && p.item.Name == "late-web-1" }},
		{name: "owner uid", selector: "search.clusterpedia.io/clusters=c1,search.clusterpedia.io/owner-uid=" + rs.item.UID,
			want:  func(p optionRow) bool { return inCluster(p, "c1") && p.owner == rs.item.UID },
			watch: "a watch cannot select by owner"},
		{name: "owner uid, seniority 1", selector: "search.clusterpedia.io/clusters=c1,search.clusterpedia.io/owner-uid=" + rs.owner + ",search.clusterpedia.io/owner-seniority=1",
			want:  func(p optionRow) bool { return inCluster(p, "c1") && p.owner != "" && rsOwnerOf[p.owner] == rs.owner },
			watch: "a watch cannot select by owner"},
		{name: "owner name", selector: "search.clusterpedia.io/clusters=c1,search.clusterpedia.io/owner-name=" + rs.item.Name + ",search.clusterpedia.io/owner-gr=replicasets.apps",
			want:  func(p optionRow) bool { return inCluster(p, "c1") && rsNamed[p.owner] },
			watch: "a watch cannot select by owner"},
		{name: "since", selector: "search.clusterpedia.io/since=" + fmt.Sprint(split.Unix()),
			want: func(p optionRow) bool { return !p.created.Before(split) }},
		{name: "before", selector: "search.clusterpedia.io/before=" + fmt.Sprint(split.Unix()),
			want: func(p optionRow) bool { return p.created.Before(split) }},
		{name: "labels", selector: "app=" + someApp + ",tier in (frontend),env!=prod",
			want: func(p optionRow) bool {
				return p.labels["app"] == someApp && p.labels["tier"] == "frontend" && p.labels["env"] != "prod"
			}},
		{name: "a label's != and notin also select objects without it", selector: "pod-template-hash!=nothing,app notin (" + someApp + ")",
			want: func(p optionRow) bool {
				return p.labels["pod-template-hash"] != "nothing" && p.labels["app"] != someApp
			}},
		{name: "label exists and not", selector: "tier,!pod-template-hash",
			want: func(p optionRow) bool { return p.labels.Has("tier") && !p.labels.Has("pod-template-hash") }},
		{name: "fields", fields: "metadata.namespace=team-a,metadata.name!=" + someName,
			want: func(p optionRow) bool { return p.item.Namespace == "team-a" && p.item.Name != someName }},
		{name: "fields in", fields: "metadata.namespace in (default,team-b)",
			want: func(p optionRow) bool { return p.item.Namespace == "default" || p.item.Namespace == "team-b" }},
		{name: "a field a watch cannot follow", fields: "metadata.labels.tier=frontend",
			want:  func(p optionRow) bool { return p.labels["tier"] == "frontend" },
			watch: "a watch selects by metadata.name and metadata.namespace only"},
		{name: "fuzzy name", selector: "internalstorage.clusterpedia.io/fuzzy-name=web",
			want:  func(p optionRow) bool { return strings.Contains(p.item.Name, "web") },
			watch: "fuzzy name"},
		{name: "orderby name desc", selector: "search.clusterpedia.io/orderby=name_desc",
			want: func(optionRow) bool { return true }, byName: true, desc: true, watch: "-"},
		{name: "limit and offset", selector: "search.clusterpedia.io/orderby=name,search.clusterpedia.io/limit=7,search.clusterpedia.io/offset=5",
			want: func(optionRow) bool { return true }, byName: true, from: 5, to: 12, watch: "-"},
		{name: "remaining count", selector: "search.clusterpedia.io/orderby=name,search.clusterpedia.io/limit=3,search.clusterpedia.io/with-remaining-count=true",
			want: func(optionRow) bool { return true }, byName: true, from: 0, to: 3, remaining: true, watch: "-"},
	}

	client := env.Client.Resource(testenv.Pods.GVR)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []optionRow
			for _, p := range pods {
				if tc.want(p) {
					want = append(want, p)
				}
			}
			if len(want) == 0 && tc.to == 0 {
				t.Fatalf("the case selects nothing of the %d pods: it would prove nothing", len(pods))
			}
			list, err := client.List(ctx, metav1.ListOptions{LabelSelector: tc.selector, FieldSelector: tc.fields})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var got []restItem
			for i := range list.Items {
				item, _ := servedItem(t, &list.Items[i])
				got = append(got, item)
			}
			if tc.byName {
				names := func(items []restItem) []string {
					var out []string
					for _, i := range items {
						out = append(out, i.Name)
					}
					return out
				}
				sort.SliceStable(want, func(i, j int) bool {
					if tc.desc {
						return want[i].item.Name > want[j].item.Name
					}
					return want[i].item.Name < want[j].item.Name
				})
				wantItems := rowsItems(want)
				if tc.to > 0 {
					wantItems = wantItems[tc.from:tc.to]
				}
				if fmt.Sprint(names(got)) != fmt.Sprint(names(wantItems)) {
					t.Errorf("the list's names, in order:\n got  %v\n want %v", names(got), names(wantItems))
				}
			} else if fmt.Sprint(sortItems(got)) != fmt.Sprint(rowsItems(want)) {
				t.Errorf("the list:\n got  %v\n want %v", sortItems(got), rowsItems(want))
			}
			if tc.remaining {
				r := list.GetRemainingItemCount()
				if r == nil || *r != int64(len(pods)-tc.to) {
					t.Errorf("remainingItemCount %v, want %d", r, len(pods)-tc.to)
				}
			}
			if tc.watch == "-" {
				return
			}

			sendInitialEvents := true
			w, err := client.Watch(ctx, metav1.ListOptions{
				LabelSelector: tc.selector, FieldSelector: tc.fields,
				SendInitialEvents: &sendInitialEvents, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				AllowWatchBookmarks: true,
			})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()
			if tc.watch != "" {
				status := errorEvent(t, w)
				if !apierrors.IsBadRequest(status) || !strings.Contains(status.Error(), tc.watch) {
					t.Errorf("the watch: %v; want a 400 naming %q", status, tc.watch)
				}
				return
			}
			var initial []restItem
			for {
				e := nextEvent(t, w)
				if e.Type == watch.Bookmark {
					break
				}
				if e.Type != watch.Added {
					t.Fatalf("among the initial events: %v", e)
				}
				initial = append(initial, e.Item)
			}
			if fmt.Sprint(sortItems(initial)) != fmt.Sprint(sortItems(got)) {
				t.Errorf("the WatchList's initial events are not the list's objects:\n got  %v\n want %v", sortItems(initial), sortItems(got))
			}
		})
	}
	data, _ := json.Marshal(map[string]int{"pods": len(pods), "replicasets": len(rsets)})
	t.Logf("%d cases over %s", len(cases), data)
}

func rowsItems(rows []optionRow) []restItem {
	items := make([]restItem, len(rows))
	for i, r := range rows {
		items[i] = r.item
	}
	return items
}
