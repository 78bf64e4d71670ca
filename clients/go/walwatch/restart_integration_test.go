package walwatch_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// After the database restarts, walwatch's stream reconnects by itself; its
// first handoff, fresh RV and initial state must succeed too, though the
// connections walwatch kept for them died with the server. (Found by the
// informers: a WatchList just after a restart failed with "cannot begin a
// snapshot: terminating connection due to administrator command", and
// client-go fell back to a list.)
func TestPostgresSnapshotsAfterDatabaseRestart(t *testing.T) {
	t.Parallel()
	db, server := testenv.NewPrivatePostgres(t)
	snapshotsAfterDatabaseRestart(t, db, server)
}

func TestMariaDBSnapshotsAfterDatabaseRestart(t *testing.T) {
	t.Parallel()
	db, server := testenv.NewPrivateMariaDB(t)
	snapshotsAfterDatabaseRestart(t, db, server)
}

func snapshotsAfterDatabaseRestart(t *testing.T, db *testenv.DB, server *testenv.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), integrationBound)
	defer cancel()
	// One state worker: the initial state after the restart is read by the
	// worker that read the one before it, on the connection it kept.
	ww := testenv.StartWalwatch(t, db, testenv.WalwatchOptions{Args: []string{"--state-workers", "1"}})
	writer := testenv.NewWriter(db, testenv.WriterConfig{Seed: 9, Resources: []testenv.Resource{testenv.Pods}})
	if err := writer.Seed(ctx, 2); err != nil {
		t.Fatal(err)
	}

	// Each kind of read once, so that walwatch keeps a connection for each.
	list := func() (string, error) {
		return ww.Client.List(ctx, db.SQL, db.Dialect, func(ctx context.Context, q walwatch.Queryer) error {
			var n int
			return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM resources").Scan(&n)
		})
	}
	watchList := func() error {
		yes := true
		w, err := ww.Client.Watch(ctx, walwatch.WatchRequest{Resource: testenv.Pods.GVR, Options: metav1.ListOptions{
			SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
		}})
		if err != nil {
			return err
		}
		defer w.Stop()
		for e := range w.ResultChan() {
			switch e.Type {
			case watch.Error:
				return apierrors.FromObject(e.Object)
			case watch.Bookmark:
				return nil // the initial state's end
			}
		}
		return context.DeadlineExceeded
	}
	rv, err := list()
	if err != nil {
		t.Fatal(err)
	}
	if err := watchList(); err != nil {
		t.Fatal(err)
	}
	if _, err := ww.Client.FreshRV(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := ww.Client.Watch(ctx, walwatch.WatchRequest{Resource: testenv.Pods.GVR, Options: metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()

	server.Restart(t)
	// walwatch's stream is back once a write made now reaches the watch
	// (a position, not a time).
	// (The test's own pooled connections died too: the first write may fail.)
	for err := writer.Put(ctx, testenv.Pods, "c1", "default", "after-restart", nil); err != nil; err = writer.Put(ctx, testenv.Pods, "c1", "default", "after-restart", nil) {
		if ctx.Err() != nil {
			t.Fatalf("writing after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for got := false; !got; {
		select {
		case e, ok := <-live.ResultChan():
			if !ok || e.Type == watch.Error {
				t.Fatalf("the watch across the restart ended: %v", e.Object)
			}
			if u, isObj := e.Object.(*unstructured.Unstructured); isObj && u.GetName() == "after-restart" {
				got = true
			}
		case <-time.After(integrationBound):
			t.Fatal("the write after the restart did not reach the watch")
		}
	}

	// The first of each, no retry: a kept connection that died with the
	// server is walwatch's to replace, not the client's failure.
	if _, err := list(); err != nil {
		t.Errorf("the first handoff after the restart: %v", err)
	}
	if err := watchList(); err != nil {
		t.Errorf("the first initial state after the restart: %v", err)
	}
	if _, err := ww.Client.FreshRV(ctx); err != nil {
		t.Errorf("the first fresh RV after the restart: %v", err)
	}
}
