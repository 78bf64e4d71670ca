package testenv

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

func TestPrivatePostgres(t *testing.T) { testPrivateServer(t, NewPrivatePostgres) }

func TestPrivateMariaDB(t *testing.T) { testPrivateServer(t, NewPrivateMariaDB) }

// A private server restarts and crashes under a writer and a walwatch,
// and both carry on by themselves once it is back.
func testPrivateServer(t *testing.T, newServer func(testing.TB) (*DB, *Server)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, srv := newServer(t)
	w := StartWalwatch(t, db, WalwatchOptions{})
	writer := NewWriter(db, WriterConfig{Seed: 4, TolerateErrors: true})
	if err := writer.Seed(ctx, 1); err != nil {
		t.Fatal(err)
	}
	stop := writer.RunInBackground(ctx, 100)
	defer stop()
	writesGoOn := func(what string) {
		t.Helper()
		start := writer.Writes()
		if err := waitFor(60*time.Second, func() error {
			if writer.Writes() < start+20 {
				return context.DeadlineExceeded
			}
			return nil
		}); err != nil {
			t.Fatalf("after %s the writer made %d writes: %v", what, writer.Writes()-start, err)
		}
	}

	pid := srv.Pid(t)
	srv.Restart(t)
	if srv.Pid(t) == pid {
		t.Errorf("Restart: the server's pid is still %d", pid)
	}
	writesGoOn("Restart")
	srv.Kill(t)
	srv.Start(t)
	writesGoOn("Kill and Start")
	if err := stop(); err != nil {
		t.Fatalf("the writer: %v", err)
	}
	t.Logf("%d writes, %d failed", writer.Writes(), writer.Failures())

	w.WaitReady(t)
	wi := watchPods(t, w)
	if err := writer.Put(ctx, Pods, "c1", "default", "after-crash", nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, wi, watch.Added, "after-crash")
}
