package walwatch_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// bound is an upper bound on how long a test waits for a condition that
// should hold at once (a channel closing, a server seeing its connection
// closed). Generous: the tests run on loaded 2-core machines with -race.
const bound = 30 * time.Second

// transports are the three ways to name walwatch's address.
var transports = []string{"unix", "path", "tcp"}

// recorded is one request as the fake walwatch received it.
type recorded struct {
	Method   string
	Target   string // the request target as sent (escaped path and query)
	Path     string // the escaped path
	RawQuery string
	Header   http.Header
	// Gone is closed when the handler saw the request's context end while
	// it was still serving it: the client closed the connection.
	Gone chan struct{}
}

// fakeWalwatch is an HTTP server on a Unix socket or loopback TCP that
// records each request and answers as the test scripts it.
type fakeWalwatch struct {
	// Endpoint is the Config.Endpoint that reaches the fake.
	Endpoint string
	// Socket is the Unix socket's path ("" on TCP).
	Socket string

	srv   *httptest.Server
	quit  chan struct{}
	conns atomic.Int64

	mu      sync.Mutex
	handler func(w http.ResponseWriter, r *http.Request, rec *recorded)
	reqs    []*recorded
}

// socketDir is a short directory for a Unix socket: t.TempDir() under a
// long test name can pass the 107 bytes a socket path may have.
func socketDir(t testing.TB) string {
	t.Helper()
	if dir := t.TempDir(); len(dir) < 90 {
		return dir
	}
	dir, err := os.MkdirTemp("", "ww")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startFake starts a fake walwatch on transport ("unix": unix://PATH,
// "path": the bare socket path, "tcp": http://127.0.0.1:PORT) answering
// with handler.
func startFake(t testing.TB, transport string, handler func(w http.ResponseWriter, r *http.Request, rec *recorded)) *fakeWalwatch {
	t.Helper()
	f := &fakeWalwatch{handler: handler, quit: make(chan struct{})}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	switch transport {
	case "unix", "path":
		f.Socket = filepath.Join(socketDir(t), "walwatch.sock")
		l, err := net.Listen("unix", f.Socket)
		if err != nil {
			t.Fatal(err)
		}
		f.srv.Listener.Close()
		f.srv.Listener = l
		f.srv.Start()
		f.Endpoint = f.Socket
		if transport == "unix" {
			f.Endpoint = "unix://" + f.Socket
		}
	case "tcp":
		f.srv.Start()
		f.Endpoint = f.srv.URL
		if !strings.HasPrefix(f.Endpoint, "http://127.0.0.1:") {
			t.Fatalf("the TCP fake listens at %s, want http://127.0.0.1:PORT", f.Endpoint)
		}
	default:
		t.Fatalf("unknown transport %q", transport)
	}
	t.Cleanup(func() {
		close(f.quit)
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

func (f *fakeWalwatch) serve(w http.ResponseWriter, r *http.Request) {
	path, query, _ := strings.Cut(r.RequestURI, "?")
	rec := &recorded{
		Method:   r.Method,
		Target:   r.RequestURI,
		Path:     path,
		RawQuery: query,
		Header:   r.Header.Clone(),
		Gone:     make(chan struct{}),
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	handler := f.handler
	f.mu.Unlock()
	handler(w, r, rec)
}

// setHandler replaces the fake's handler for the requests to come.
func (f *fakeWalwatch) setHandler(handler func(w http.ResponseWriter, r *http.Request, rec *recorded)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handler = handler
}

// requests is what the fake received so far.
func (f *fakeWalwatch) requests() []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*recorded(nil), f.reqs...)
}

// only is the one request the fake received.
func (f *fakeWalwatch) only(t testing.TB) *recorded {
	t.Helper()
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("walwatch received %d requests, want 1: %v", len(reqs), targets(reqs))
	}
	return reqs[0]
}

// last is the latest request the fake received.
func (f *fakeWalwatch) last(t testing.TB) *recorded {
	t.Helper()
	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("walwatch received no request")
	}
	return reqs[len(reqs)-1]
}

func targets(reqs []*recorded) []string {
	var s []string
	for _, r := range reqs {
		s = append(s, r.Method+" "+r.Target)
	}
	return s
}

// client is a Client of the fake.
func (f *fakeWalwatch) client(t testing.TB) *walwatch.Client {
	t.Helper()
	return newClient(t, walwatch.Config{Endpoint: f.Endpoint})
}

func newClient(t testing.TB, cfg walwatch.Config) *walwatch.Client {
	t.Helper()
	c, err := walwatch.NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient(%+v): %v", cfg, err)
	}
	return c
}

// block holds a handler until the client closes its connection (then it
// closes rec.Gone) or the test ends.
func (f *fakeWalwatch) block(r *http.Request, rec *recorded) {
	select {
	case <-r.Context().Done():
		close(rec.Gone)
	case <-f.quit:
	}
}

// Handlers.

// answer writes code, headers and body as walwatch does.
func answer(code int, body string, header ...string) func(w http.ResponseWriter, r *http.Request, rec *recorded) {
	return func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if w.Header().Get("Content-Type") == "" && body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// startStream writes a watch's 200 header and flushes it.
func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// writeChunk writes s as one chunk of the stream.
func writeChunk(w http.ResponseWriter, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// stream answers a watch with chunks, one flush each, then ends the stream
// (the final chunk) if end, else holds it open until the client leaves.
func (f *fakeWalwatch) stream(end bool, chunks ...string) func(w http.ResponseWriter, r *http.Request, rec *recorded) {
	return func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		startStream(w)
		for _, c := range chunks {
			if writeChunk(w, c) != nil {
				break
			}
		}
		if !end {
			f.block(r, rec)
		}
	}
}

// Events as walwatch writes them.

func podJSON(name, rv string) string {
	return fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"default","uid":"uid-%s","resourceVersion":%q,"annotations":{"walwatch.clusterpedia.io/member-resource-version":"4711"}},"spec":{"nodeName":"node-1"}}`, name, name, rv)
}

func eventLine(typ, object string) string {
	return `{"type":"` + typ + `","object":` + object + "}\n"
}

const (
	bookmarkEnd  = `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"22381940","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"
	bookmark     = `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"22381950"}}}` + "\n"
	errorExpired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (22381935)","reason":"Expired","code":410}}` + "\n"
)

// Reading a watch.

// next is the watch's next event; it fails the test if the channel closes
// or nothing comes within bound.
func next(t testing.TB, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the result channel closed, want an event")
		}
		return ev
	case <-time.After(bound):
		t.Fatalf("no event within %v", bound)
	}
	panic("not reached")
}

// expectClosed fails the test unless the watch's channel closes, with no
// event, within bound.
func expectClosed(t testing.TB, w watch.Interface) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("got event %s %s, want the result channel closed with no event", ev.Type, describe(ev.Object))
		}
	case <-time.After(bound):
		t.Fatalf("the result channel did not close within %v", bound)
	}
}

// expectGone fails the test unless the fake's handler of rec sees its
// connection closed within bound.
func expectGone(t testing.TB, rec *recorded) {
	t.Helper()
	select {
	case <-rec.Gone:
	case <-time.After(bound):
		t.Fatalf("walwatch did not see the connection of %s closed within %v", rec.Target, bound)
	}
}

func describe(obj any) string {
	return fmt.Sprintf("%#v", obj)
}

// watchCtx is a context for a test's watch, cancelled when the test ends.
func watchCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
