package walwatch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

func TestNewClientAcceptsEndpoints(t *testing.T) {
	for _, endpoint := range []string{
		"",
		walwatch.DefaultEndpoint,
		"unix:///run/walwatch/walwatch.sock",
		"/run/walwatch/walwatch.sock",
		"http://127.0.0.1:8080",
		"http://127.0.0.1:8080/",
		"http://[::1]:8080",
		"http://localhost:8080",
	} {
		if _, err := walwatch.NewClient(walwatch.Config{Endpoint: endpoint}); err != nil {
			t.Errorf("NewClient(%q): %v, want a client", endpoint, err)
		}
	}
}

func TestNewClientRefusesBadEndpoints(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		want     string // in the error
	}{
		{"run/walwatch.sock", "want unix:///path/to/walwatch.sock"},
		{"./walwatch.sock", "want unix:///path/to/walwatch.sock"},
		{"unix://run/walwatch.sock", "must be absolute"},
		{"unix://", "must be absolute"},
		{"unix:/run/walwatch.sock", "want unix:///path/to/walwatch.sock"},
		{"https://127.0.0.1:8080", "want unix:///path/to/walwatch.sock"},
		{"tcp://127.0.0.1:8080", "want unix:///path/to/walwatch.sock"},
		{"127.0.0.1:8080", "want unix:///path/to/walwatch.sock"},
		{"http://127.0.0.1:8080/walwatch", "with no path"},
		{"http://127.0.0.1:8080/api/v1", "with no path"},
		{"http://127.0.0.1:8080?watch=true", "with no path"},
		{"http://", "want http://HOST:PORT"},
		{"http:///run/walwatch.sock", "want http://HOST:PORT"},
		{"http://127.0.0.1:8080/%zz", "invalid URL escape"},
	} {
		c, err := walwatch.NewClient(walwatch.Config{Endpoint: tc.endpoint})
		if err == nil {
			t.Errorf("NewClient(%q) = %v, want an error", tc.endpoint, c)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.endpoint) {
			t.Errorf("NewClient(%q): %q, want an error naming the endpoint and saying %q", tc.endpoint, err, tc.want)
		}
		if _, ok := err.(apierrors.APIStatus); ok {
			t.Errorf("NewClient(%q): %v is a Status, want a plain error", tc.endpoint, err)
		}
	}
}

// An http endpoint whose host name is empty dials no named host (Go dials
// ":8080" as the local system): refused like "http://".
func TestNewClientRefusesEndpointWithoutHostName(t *testing.T) {
	for _, endpoint := range []string{"http://:8080", "http://:8080/"} {
		if c, err := walwatch.NewClient(walwatch.Config{Endpoint: endpoint}); err == nil {
			t.Errorf("NewClient(%q) = %v, want an error (no host name)", endpoint, c)
		}
	}
}

// dynamicParameterCodec is how client-go's dynamic client encodes
// ListOptions (k8s.io/client-go/dynamic/scheme.go), rebuilt here: a scheme
// with metav1 registered at version "v1" of the core group.
var dynamicParameterCodec = func() runtime.ParameterCodec {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return runtime.NewParameterCodec(scheme)
}()

func TestWatchURLs(t *testing.T) {
	yes, no := true, false
	timeout := int64(30)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "widgets"}

	for _, tc := range []struct {
		name      string
		req       walwatch.WatchRequest
		wantPath  string // as sent, escaped
		cluster   string // decoded from the path, "" if none
		namespace string
		wantQuery string // as sent
	}{
		{
			name:      "core",
			req:       walwatch.WatchRequest{Resource: pods},
			wantPath:  "/api/v1/pods",
			wantQuery: "watch=true",
		},
		{
			name:      "core namespaced",
			req:       walwatch.WatchRequest{Resource: pods, Namespace: "kube-system", Options: metav1.ListOptions{ResourceVersion: "22381936"}},
			wantPath:  "/api/v1/namespaces/kube-system/pods",
			namespace: "kube-system",
			wantQuery: "resourceVersion=22381936&watch=true",
		},
		{
			name:      "core of a cluster",
			req:       walwatch.WatchRequest{Resource: pods, Cluster: "member-1"},
			wantPath:  "/clusters/member-1/api/v1/pods",
			cluster:   "member-1",
			wantQuery: "watch=true",
		},
		{
			name:      "core of a cluster, namespaced",
			req:       walwatch.WatchRequest{Resource: pods, Cluster: "member-1", Namespace: "default"},
			wantPath:  "/clusters/member-1/api/v1/namespaces/default/pods",
			cluster:   "member-1",
			namespace: "default",
			wantQuery: "watch=true",
		},
		{
			name:      "named group",
			req:       walwatch.WatchRequest{Resource: deployments},
			wantPath:  "/apis/apps/v1/deployments",
			wantQuery: "watch=true",
		},
		{
			name:      "named group namespaced",
			req:       walwatch.WatchRequest{Resource: deployments, Namespace: "default"},
			wantPath:  "/apis/apps/v1/namespaces/default/deployments",
			namespace: "default",
			wantQuery: "watch=true",
		},
		{
			name:      "named group of a cluster",
			req:       walwatch.WatchRequest{Resource: widgets, Cluster: "east"},
			wantPath:  "/clusters/east/apis/example.com/v1alpha1/widgets",
			cluster:   "east",
			wantQuery: "watch=true",
		},
		{
			name:      "named group of a cluster, namespaced",
			req:       walwatch.WatchRequest{Resource: widgets, Cluster: "east", Namespace: "team-a"},
			wantPath:  "/clusters/east/apis/example.com/v1alpha1/namespaces/team-a/widgets",
			cluster:   "east",
			namespace: "team-a",
			wantQuery: "watch=true",
		},
		{
			// Every byte that is not a path segment's own is escaped: a
			// slash is not a separator, ? and # end no path, % is not an
			// escape, a space and UTF-8 are percent-encoded.
			name:      "escaped cluster and namespace",
			req:       walwatch.WatchRequest{Resource: pods, Cluster: "east/1 ü?#%+", Namespace: "a;b,c"},
			wantPath:  "/clusters/east%2F1%20%C3%BC%3F%23%25+/api/v1/namespaces/a%3Bb%2Cc/pods",
			cluster:   "east/1 ü?#%+",
			namespace: "a;b,c",
			wantQuery: "watch=true",
		},
		{
			name:      "escaped: what looks like an escape",
			req:       walwatch.WatchRequest{Resource: widgets, Cluster: "a%2Fb"},
			wantPath:  "/clusters/a%252Fb/apis/example.com/v1alpha1/widgets",
			cluster:   "a%2Fb",
			wantQuery: "watch=true",
		},
		{
			name: "every watch option",
			req: walwatch.WatchRequest{Resource: pods, Options: metav1.ListOptions{
				LabelSelector:        "app in (a, b),!tier",
				FieldSelector:        "metadata.name=web-0,cluster!=east",
				ResourceVersion:      "22381936",
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				SendInitialEvents:    &yes,
				AllowWatchBookmarks:  true,
				TimeoutSeconds:       &timeout,
			}},
			wantPath: "/api/v1/pods",
			wantQuery: "allowWatchBookmarks=true&fieldSelector=metadata.name%3Dweb-0%2Ccluster%21%3Deast" +
				"&labelSelector=app+in+%28a%2C+b%29%2C%21tier&resourceVersion=22381936" +
				"&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=30&watch=true",
		},
		{
			name: "sendInitialEvents=false",
			req: walwatch.WatchRequest{Resource: pods, Options: metav1.ListOptions{
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				SendInitialEvents:    &no,
				AllowWatchBookmarks:  true,
			}},
			wantPath:  "/api/v1/pods",
			wantQuery: "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=false&watch=true",
		},
		{
			name:      "resourceVersion 0, watch already set",
			req:       walwatch.WatchRequest{Resource: pods, Options: metav1.ListOptions{Watch: true, ResourceVersion: "0"}},
			wantPath:  "/api/v1/pods",
			wantQuery: "resourceVersion=0&watch=true",
		},
	} {
		for _, transport := range transports {
			t.Run(tc.name+"/"+transport, func(t *testing.T) {
				f := startFake(t, transport, func(w http.ResponseWriter, r *http.Request, rec *recorded) {
					startStream(w)
				})
				w, err := f.client(t).Watch(watchCtx(t), tc.req)
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
				expectClosed(t, w)

				got := f.only(t)
				if got.Method != http.MethodGet {
					t.Errorf("method %s, want GET", got.Method)
				}
				if got.Path != tc.wantPath {
					t.Errorf("path %s, want %s", got.Path, tc.wantPath)
				}
				if p := tc.req.Path(); p != tc.wantPath {
					t.Errorf("WatchRequest.Path() = %s, want %s", p, tc.wantPath)
				}
				if got.RawQuery != tc.wantQuery {
					t.Errorf("query %s\nwant       %s", got.RawQuery, tc.wantQuery)
				}
				if accept := got.Header.Get("Accept"); accept != "application/json" {
					t.Errorf("Accept: %q, want application/json", accept)
				}

				// The segments decode, one by one as walwatch decodes
				// them, to the request's cluster and namespace.
				var cluster, namespace string
				segments := strings.Split(strings.TrimPrefix(got.Path, "/"), "/")
				for i := 0; i+1 < len(segments); i++ {
					s, err := url.PathUnescape(segments[i+1])
					if err != nil {
						t.Fatalf("segment %q: %v", segments[i+1], err)
					}
					switch segments[i] {
					case "clusters":
						if i == 0 {
							cluster = s
						}
					case "namespaces":
						namespace = s
					}
				}
				if cluster != tc.cluster || namespace != tc.namespace {
					t.Errorf("path %s decodes to cluster %q, namespace %q; want %q, %q", got.Path, cluster, namespace, tc.cluster, tc.namespace)
				}

				// The query is what client-go sends for these options: as
				// metav1.ParameterCodec encodes them (typed clients), and
				// as the dynamic client does, with watch=true.
				opts := tc.req.Options
				opts.Watch = true
				for name, codec := range map[string]struct {
					c  runtime.ParameterCodec
					gv schema.GroupVersion
				}{
					"metav1.ParameterCodec":  {metav1.ParameterCodec, metav1.SchemeGroupVersion},
					"dynamic client's codec": {dynamicParameterCodec, schema.GroupVersion{Version: "v1"}},
				} {
					want, err := codec.c.EncodeParameters(&opts, codec.gv)
					if err != nil {
						t.Fatal(err)
					}
					if got.RawQuery != want.Encode() {
						t.Errorf("query %s\n%s encodes %s", got.RawQuery, name, want.Encode())
					}
				}
				query, err := tc.req.Query()
				if err != nil {
					t.Fatal(err)
				}
				if query.Encode() != tc.wantQuery {
					t.Errorf("WatchRequest.Query() = %s, want %s", query.Encode(), tc.wantQuery)
				}
			})
		}
	}
}

func TestWatchWithoutVersionOrResourceIsBadRequestAndSendsNothing(t *testing.T) {
	f := startFake(t, "unix", func(w http.ResponseWriter, r *http.Request, rec *recorded) { startStream(w) })
	c := f.client(t)
	for _, gvr := range []schema.GroupVersionResource{
		{Resource: "pods"},
		{Group: "apps", Resource: "deployments"},
		{Version: "v1"},
		{Group: "apps", Version: "v1"},
		{},
	} {
		w, err := c.Watch(context.Background(), walwatch.WatchRequest{Resource: gvr, Cluster: "east", Namespace: "default"})
		if err == nil {
			w.Stop()
			t.Errorf("Watch of %#v: no error, want 400", gvr)
			continue
		}
		var status *apierrors.StatusError
		if !errors.As(err, &status) || !apierrors.IsBadRequest(err) || status.ErrStatus.Code != http.StatusBadRequest {
			t.Errorf("Watch of %#v: %#v, want a 400 BadRequest *StatusError", gvr, err)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("walwatch received %v, want no request", targets(reqs))
	}
}

// walwatch down: the error is plain (a connection error, as client-go's),
// not a Status that apierrors would classify.
func TestUnreachableWalwatchIsAPlainError(t *testing.T) {
	dir := socketDir(t)

	// A socket file that nobody listens on (walwatch died).
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the stale socket is gone: %v", err)
	}

	// A TCP port that nobody listens on.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := "http://" + tl.Addr().String()
	tl.Close()

	for _, tc := range []struct {
		endpoint string
		want     error
	}{
		// A missing socket (walwatch restarting) is both: ENOENT for a
		// person, ECONNREFUSED for client-go.
		{"unix://" + filepath.Join(dir, "missing.sock"), syscall.ENOENT},
		{filepath.Join(dir, "missing.sock"), syscall.ENOENT},
		{"unix://" + stale, syscall.ECONNREFUSED},
		{closedPort, syscall.ECONNREFUSED},
	} {
		c := newClient(t, walwatch.Config{Endpoint: tc.endpoint})
		ops := map[string]func() error{
			"Watch": func() error {
				w, err := c.Watch(context.Background(), walwatch.WatchRequest{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}})
				if err == nil {
					w.Stop()
				}
				return err
			},
			"HandoffPostgres": func() error {
				_, err := c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:100:"})
				return err
			},
			"HandoffBinlog": func() error {
				_, err := c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 4})
				return err
			},
			"FreshRV": func() error {
				_, err := c.FreshRV(context.Background())
				return err
			},
		}
		for name, op := range ops {
			err := op()
			if err == nil {
				t.Errorf("%s on %s: no error, want a connection error", name, tc.endpoint)
				continue
			}
			var status apierrors.APIStatus
			if errors.As(err, &status) {
				t.Errorf("%s on %s: %v is a Status (%s), want a plain error", name, tc.endpoint, err, apierrors.ReasonForError(err))
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%s on %s: %v, want %v in its chain", name, tc.endpoint, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "walwatch: ") {
				t.Errorf("%s on %s: %q, want it to name walwatch", name, tc.endpoint, err)
			}
			// client-go's reflector watches again from where it was after a
			// refused connection, and lists everything again after any
			// other error: walwatch restarting (its socket gone, or not
			// listened on) must read as refused.
			if !utilnet.IsConnectionRefused(err) {
				t.Errorf("%s on %s: %v is not a refused connection to client-go (utilnet.IsConnectionRefused)", name, tc.endpoint, err)
			}
		}
	}
}
