package walwatch_test

// The list helpers against real databases and a real walwatch, as an
// APIServer uses them: a list read in a snapshot, its RV, and a watch from
// that RV must together give exactly the table, however the writes
// interleave; and the protocol's retry rules, against a walwatch that
// answers 409, 410 and 504 (a fake one, on the same real database: only a
// synchronous standby makes a real 409).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gmysql "gorm.io/driver/mysql"
	gpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
	"github.com/walwatch/walwatch/clients/go/walwatchgorm"
)

const integrationBound = 2 * time.Minute // an upper integrationBound on a condition, never a wait

func TestPostgresListThenWatchIsExact(t *testing.T) {
	t.Parallel()
	listThenWatchIsExact(t, testenv.NewPostgres(t), false)
}

func TestMariaDBListThenWatchIsExact(t *testing.T) {
	t.Parallel()
	listThenWatchIsExact(t, testenv.NewMariaDB(t), false)
}

func TestPostgresGormListThenWatchIsExact(t *testing.T) {
	t.Parallel()
	listThenWatchIsExact(t, testenv.NewPostgres(t), true)
}

func TestMariaDBGormListThenWatchIsExact(t *testing.T) {
	t.Parallel()
	listThenWatchIsExact(t, testenv.NewMariaDB(t), true)
}

// listThenWatchIsExact lists the pods of one cluster over and over while a
// writer changes them, and checks each list: its state plus the events of a
// watch from its RV, up to the writes' end, must be what SQL holds at the
// end. A list that missed a commit before its RV, or a watch that repeated
// or skipped one after it, leaves another state.
func listThenWatchIsExact(t *testing.T, db *testenv.DB, viaGorm bool) {
	// A bookmark a second: a replay ends at the first bookmark or event at
	// the writes' end, whichever resource wrote last.
	ww := testenv.StartWalwatch(t, db, testenv.WalwatchOptions{Args: []string{"--bookmark-interval", "1s"}})
	ctx := context.Background()
	writer := testenv.NewWriter(db, testenv.WriterConfig{Seed: 7, Clusters: []string{"c1", "c2"}, Resources: []testenv.Resource{testenv.Pods, testenv.ConfigMaps}, Hot: testenv.Pods.GVR})
	if err := writer.Seed(ctx, 40); err != nil {
		t.Fatal(err)
	}
	var gdb *gorm.DB
	if viaGorm {
		dialector := gpostgres.New(gpostgres.Config{Conn: db.SQL})
		if db.Dialect == walwatch.MySQL {
			dialector = gmysql.New(gmysql.Config{Conn: db.SQL})
		}
		var err error
		if gdb, err = gorm.Open(dialector, &gorm.Config{SkipDefaultTransaction: true}); err != nil {
			t.Fatal(err)
		}
	}

	type listed struct {
		rv    string
		state map[string]string // namespace/name -> object
	}
	var lists []listed
	stop := writer.RunInBackground(ctx, 0)
	for i := 0; i < 12; i++ {
		state := map[string]string{}
		var rv string
		var err error
		if viaGorm {
			rv, err = walwatchgorm.List(ctx, ww.Client, gdb, func(tx *gorm.DB) error {
				clear(state)
				var rows []struct {
					Namespace, Name string
					Object          string
				}
				err := tx.Table("resources").Select("namespace, name, object").
					Where(map[string]any{"group": "", "version": "v1", "resource": "pods", "cluster": "c1"}).Find(&rows).Error
				for _, r := range rows {
					state[r.Namespace+"/"+r.Name] = r.Object
				}
				return err
			})
		} else {
			rv, err = ww.Client.List(ctx, db.SQL, db.Dialect, func(ctx context.Context, q walwatch.Queryer) error {
				clear(state)
				return readPods(ctx, db.Dialect, q, state)
			})
		}
		if err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
		lists = append(lists, listed{rv, state})
		writer.WaitWrites(t, 25, integrationBound)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	end, err := ww.Client.FreshRV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	if err := readPods(ctx, db.Dialect, db.SQL, want); err != nil {
		t.Fatal(err)
	}

	// The replays at once: each waits for a bookmark at the end.
	diffs := make([]string, len(lists))
	var wg sync.WaitGroup
	for i, l := range lists {
		wg.Add(1)
		go func(i int, l listed) {
			defer wg.Done()
			got, err := replay(ww.Client, l.rv, end, l.state)
			if err != nil {
				diffs[i] = err.Error()
			} else {
				diffs[i] = diffObjects(got, want)
			}
		}(i, l)
	}
	wg.Wait()
	for i, l := range lists {
		if diffs[i] != "" {
			t.Errorf("list %d at RV %s, then its watch to %s: differs from SQL: %s", i, l.rv, end, diffs[i])
		}
	}
	t.Logf("%d lists under %d writes, each continued exactly by its watch", len(lists), writer.Writes())
}

func readPods(ctx context.Context, dialect walwatch.Dialect, q walwatch.Queryer, into map[string]string) error {
	query := `SELECT namespace, name, object FROM resources WHERE "group" = '' AND version = 'v1' AND resource = 'pods' AND cluster = 'c1'`
	if dialect == walwatch.MySQL {
		query = strings.ReplaceAll(query, `"group"`, "`group`")
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ns, name, object string
		if err := rows.Scan(&ns, &name, &object); err != nil {
			return err
		}
		into[ns+"/"+name] = object
	}
	return rows.Err()
}

// replay applies the events of a watch from rv, until a bookmark or event
// at end, to a copy of state.
func replay(c *walwatch.Client, rv, end string, state map[string]string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), integrationBound)
	defer cancel()
	w, err := c.Watch(ctx, walwatch.WatchRequest{
		Resource: testenv.Pods.GVR, Cluster: "c1",
		Options: metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
	})
	if err != nil {
		return nil, fmt.Errorf("watch from %s: %w", rv, err)
	}
	defer w.Stop()
	got := map[string]string{}
	for k, v := range state {
		got[k] = v
	}
	endN, _ := strconv.ParseUint(end, 10, 64)
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			return nil, fmt.Errorf("watch from %s: %v", rv, apierrors.FromObject(e.Object))
		}
		u := e.Object.(*unstructured.Unstructured)
		key := u.GetNamespace() + "/" + u.GetName()
		switch e.Type {
		case watch.Added, watch.Modified:
			got[key] = storedForm(u)
		case watch.Deleted:
			delete(got, key)
		}
		if n, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64); n >= endN {
			return got, nil
		}
	}
	return nil, fmt.Errorf("watch from %s ended before RV %s", rv, end)
}

// storedForm is an event's object as the row stores it: walwatch moved the
// member cluster's resourceVersion into an annotation.
func storedForm(u *unstructured.Unstructured) string {
	u = u.DeepCopy()
	a := u.GetAnnotations()
	u.SetResourceVersion(a["walwatch.clusterpedia.io/member-resource-version"])
	delete(a, "walwatch.clusterpedia.io/member-resource-version")
	u.SetAnnotations(a)
	data, _ := json.Marshal(u.Object)
	return string(data)
}

func diffObjects(got, want map[string]string) string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case !sameJSON(g, w):
			out = append(out, "different "+k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("... %d more", len(out)-8))
	}
	return strings.Join(out, ", ")
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// A walwatch that falls behind the database (its connection stalled)
// answers the handoff 504: BeginSnapshot asks again with the same snapshot,
// and gives the 504 up to the caller once walwatch stays behind, as a
// Status that says so; once walwatch catches up the same call succeeds.
func TestPostgresSnapshotWhileWalwatchLags(t *testing.T) {
	t.Parallel()
	snapshotWhileWalwatchLags(t, testenv.NewPostgres(t))
}

func TestMariaDBSnapshotWhileWalwatchLags(t *testing.T) {
	t.Parallel()
	snapshotWhileWalwatchLags(t, testenv.NewMariaDB(t))
}

// walwatch's replication stream stalls (its connection alone, through a
// proxy); the database stays reachable for the handoff.

func snapshotWhileWalwatchLags(t *testing.T, db *testenv.DB) {
	proxy := testenv.NewProxy(t, db.Addr())
	// A short too-large wait: the first BeginSnapshot below waits it out
	// four times before it gives up.
	ww := testenv.StartWalwatch(t, db, testenv.WalwatchOptions{ViaProxy: proxy, Args: []string{"--too-large-rv-wait", "1s"}})
	ctx := context.Background()
	writer := testenv.NewWriter(db, testenv.WriterConfig{Seed: 3})
	ww.StallStream(t, db, proxy)
	if err := writer.Steps(ctx, 5); err != nil {
		t.Fatal(err)
	}
	_, err := ww.Client.BeginSnapshot(ctx, db.SQL, db.Dialect)
	if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("a snapshot while walwatch lags: %v; want 504 with cause ResourceVersionTooLarge", err)
	}

	// Still behind, then caught up while the same call waits: once walwatch
	// has answered one 504, the proxy lets it catch up.
	counting := &countingTransport{next: unixTransport(strings.TrimPrefix(ww.Endpoint, "unix://"))}
	c, err := walwatch.NewClient(walwatch.Config{Endpoint: ww.Endpoint, Transport: counting})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var rv string
	go func() {
		s, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
		if err == nil {
			rv = s.ResourceVersion()
			err = s.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(integrationBound)
	for counting.gatewayTimeouts.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("walwatch answered no 504 while behind")
		}
		time.Sleep(10 * time.Millisecond)
	}
	proxy.Resume()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the snapshot once walwatch caught up: %v", err)
		}
	case <-time.After(integrationBound):
		t.Fatal("BeginSnapshot did not return")
	}
	if rv == "" {
		t.Fatal("no RV")
	}
}

// countingTransport counts walwatch's 504 answers.
type countingTransport struct {
	next            http.RoundTripper
	gatewayTimeouts atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusGatewayTimeout {
		c.gatewayTimeouts.Add(1)
	}
	return resp, err
}

func unixTransport(socket string) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
}

// fakeHandoff is a walwatch whose handoff answers from a script, in front of
// a real database: it records the snapshots it was given.
type fakeHandoff struct {
	before  func() // run before each answer
	mu      sync.Mutex
	answers []int // HTTP codes, in order; then 200
	seen    []string
	calls   atomic.Int32
	server  *httptest.Server
}

func newFakeHandoff(t *testing.T, answers ...int) (*fakeHandoff, *walwatch.Client) {
	f := &fakeHandoff{answers: answers}
	dir, err := os.MkdirTemp("/tmp", "ww-fake.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "walwatch.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	f.server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.server.Listener = l
	f.server.Start()
	t.Cleanup(f.server.Close)
	c, err := walwatch.NewClient(walwatch.Config{Endpoint: "unix://" + socket, MaxSnapshots: 3})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *fakeHandoff) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := int(f.calls.Add(1)) - 1
	f.seen = append(f.seen, r.URL.RawQuery)
	f.mu.Unlock()
	if f.before != nil {
		f.before()
	}
	code := 200
	if n < len(f.answers) {
		code = f.answers[n]
	}
	w.Header().Set("Content-Type", "application/json")
	switch code {
	case 200:
		fmt.Fprintf(w, `{"kind":"ResourceVersion","apiVersion":"walwatch.clusterpedia.io/v1","resourceVersion":"%d"}`, 1000+n)
		return
	case 409:
		w.WriteHeader(409)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"commit order and snapshot visibility disagree","reason":"Conflict","code":409}`)
	case 410:
		w.WriteHeader(410)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}`)
	case 504:
		w.WriteHeader(504)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"walwatch has not caught up","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}`)
	case 500:
		w.WriteHeader(500)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"PostgreSQL could not be read","reason":"InternalError","code":500}`)
	}
}

func (f *fakeHandoff) queries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func TestPostgresSnapshotRetryRules(t *testing.T) {
	t.Parallel()
	snapshotRetryRules(t, testenv.NewPostgres(t))
}

func TestMariaDBSnapshotRetryRules(t *testing.T) {
	t.Parallel()
	snapshotRetryRules(t, testenv.NewMariaDB(t))
}

func snapshotRetryRules(t *testing.T, db *testenv.DB) {
	ctx := context.Background()
	writer := testenv.NewWriter(db, testenv.WriterConfig{Seed: 5})
	// A commit between snapshots, so that a new snapshot shows in what the
	// handoff is given.
	between := func() {
		if err := writer.Steps(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	between()

	t.Run("409 and 410 take a new snapshot", func(t *testing.T) {
		f, c := newFakeHandoff(t, 409, 410)
		f.before = between // each snapshot sees one commit more than the last
		s, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.ResourceVersion() != "1002" {
			t.Errorf("RV %q, want the third answer's", s.ResourceVersion())
		}
		if q := f.queries(); len(q) != 3 || q[0] == q[1] && q[1] == q[2] {
			t.Errorf("handoffs %q: want three, of new snapshots", q)
		}
	})
	t.Run("504 asks again with the same snapshot", func(t *testing.T) {
		f, c := newFakeHandoff(t, 504, 504)
		s, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		q := f.queries()
		if len(q) != 3 || q[0] != q[1] || q[1] != q[2] {
			t.Errorf("handoffs %q: want three with the same snapshot", q)
		}
	})
	t.Run("after MaxSnapshots the 410 is the caller's", func(t *testing.T) {
		_, c := newFakeHandoff(t, 410, 410, 410, 410)
		_, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
		if !apierrors.IsResourceExpired(err) {
			t.Errorf("%v; want the 410", err)
		}
	})
	t.Run("500 is not retried", func(t *testing.T) {
		f, c := newFakeHandoff(t, 500)
		_, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
		if !apierrors.IsInternalError(err) || f.calls.Load() != 1 {
			t.Errorf("%v after %d handoffs; want the 500 after one", err, f.calls.Load())
		}
	})
	t.Run("a list's own error, and the connection back in the pool", func(t *testing.T) {
		_, c := newFakeHandoff(t)
		one, err := sql.Open(driverName(db), db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		one.SetMaxOpenConns(1)
		mine := errors.New("the list's own error")
		for i := 0; i < 3; i++ {
			_, err := c.List(ctx, one, db.Dialect, func(context.Context, walwatch.Queryer) error { return mine })
			if !errors.Is(err, mine) {
				t.Fatalf("list %d: %v; want the list's own error", i, err)
			}
		}
		// A pool of one that lost its connection, or kept it inside a
		// transaction, would hang or fail here.
		tctx, cancel := context.WithTimeout(ctx, integrationBound)
		defer cancel()
		var n int
		if err := one.QueryRowContext(tctx, "SELECT 1").Scan(&n); err != nil {
			t.Fatalf("the pool after three failed lists: %v", err)
		}
	})
	if db.Dialect == walwatch.MySQL {
		t.Run("the pooled connection keeps its isolation level", func(t *testing.T) {
			_, c := newFakeHandoff(t)
			one, err := sql.Open("mysql", db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			one.SetMaxOpenConns(1)
			if _, err := one.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
				t.Fatal(err)
			}
			var during string
			_, err = c.List(ctx, one, db.Dialect, func(ctx context.Context, q walwatch.Queryer) error {
				return q.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&during)
			})
			if err != nil {
				t.Fatal(err)
			}
			var after string
			if err := one.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != "READ-COMMITTED" {
				t.Errorf("after a list the connection's level is %s; the list must not change the session's", after)
			}
			var server string
			if err := one.QueryRowContext(ctx, "SELECT @@server_id").Scan(&server); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("the handoff names the server", func(t *testing.T) {
			f, c := newFakeHandoff(t)
			s, err := c.BeginSnapshot(ctx, db.SQL, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			var id string
			if err := db.SQL.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
				t.Fatal(err)
			}
			if q := f.queries(); len(q) != 1 || !strings.Contains(q[0], "serverId="+id) || !strings.Contains(q[0], "binlogFile=") {
				t.Errorf("handoff %q: want binlogFile, binlogPosition and serverId=%s", q, id)
			}
		})
	}
}

func driverName(db *testenv.DB) string {
	if db.Dialect == walwatch.MySQL {
		return "mysql"
	}
	return "pgx"
}
