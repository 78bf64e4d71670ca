package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatal ends the calling goroutine, as
// t.Fatal does, and keeps the message.
type fatalRecorder struct {
	testing.TB
	message string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.message = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func fatalOf(t *testing.T, f func(testing.TB)) string {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	return rec.message
}

// A missing server or binary fails the test, naming `make test`.
func TestMissingEnvironmentFails(t *testing.T) {
	t.Setenv("WALWATCH_TEST_PGHOST", "")
	t.Setenv("WALWATCH_TEST_MYDIR", "")
	t.Setenv("WALWATCH_BINARY", "/nonexistent/walwatch")
	for name, f := range map[string]func(testing.TB){
		"NewPostgres": func(t testing.TB) { NewPostgres(t) },
		"NewMariaDB":  func(t testing.TB) { NewMariaDB(t) },
		"Binary":      func(t testing.TB) { Binary(t) },
	} {
		if msg := fatalOf(t, f); !strings.Contains(msg, "make test") {
			t.Errorf("%s without its environment: Fatal %q; want a failure naming `make test`", name, msg)
		}
	}
}
