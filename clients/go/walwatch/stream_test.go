package walwatch_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

var podsRequest = walwatch.WatchRequest{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}

// Widget is a typed object of a scheme of the test's own (client-go, whose
// scheme has corev1, is not a dependency of this module).
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec"`
}

type WidgetSpec struct {
	Size int `json:"size"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

var widgetGV = schema.GroupVersion{Group: "example.com", Version: "v1"}

// widgetDecoder is a storage-codec-like typed decoder: a scheme with Widget
// registered, decoded as client-go's typed clients decode.
func widgetDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(widgetGV, &Widget{})
	metav1.AddToGroupVersion(scheme, widgetGV)
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}

func widgetJSON(name, rv string, size int) string {
	return `{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"` + name + `","namespace":"default","resourceVersion":"` + rv + `"},"spec":{"size":` + string(rune('0'+size)) + `}}`
}

// checkPod fails the test unless ev is of type typ and carries the pod name
// at rv, as an *unstructured.Unstructured.
func checkPod(t testing.TB, ev watch.Event, typ watch.EventType, name, rv string) {
	t.Helper()
	u, ok := ev.Object.(*unstructured.Unstructured)
	if ev.Type != typ || !ok {
		t.Fatalf("got %s %T, want %s *unstructured.Unstructured", ev.Type, ev.Object, typ)
	}
	if u.GetKind() != "Pod" || u.GetAPIVersion() != "v1" || u.GetName() != name || u.GetNamespace() != "default" ||
		u.GetResourceVersion() != rv || u.GetAnnotations()["walwatch.clusterpedia.io/member-resource-version"] != "4711" {
		t.Errorf("%s: got %s %s %s/%s at %s %v, want Pod v1 default/%s at %s", typ, u.GetKind(), u.GetAPIVersion(), u.GetNamespace(), u.GetName(), u.GetResourceVersion(), u.GetAnnotations(), name, rv)
	}
	if node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); node != "node-1" {
		t.Errorf("%s: spec.nodeName %q, want node-1", typ, node)
	}
}

// checkBookmark fails the test unless ev is a bookmark at rv, with the
// WatchList end annotation if end, read as a reflector reads it.
func checkBookmark(t testing.TB, ev watch.Event, rv string, end bool) {
	t.Helper()
	if ev.Type != watch.Bookmark {
		t.Fatalf("got %s %T, want BOOKMARK", ev.Type, ev.Object)
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		t.Fatalf("bookmark %T: %v", ev.Object, err)
	}
	if m.GetResourceVersion() != rv {
		t.Errorf("bookmark at %q, want %s", m.GetResourceVersion(), rv)
	}
	if got := m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"; got != end {
		t.Errorf("bookmark annotations %v, want the initial-events-end annotation %v", m.GetAnnotations(), end)
	}
}

// checkExpired fails the test unless ev is the ERROR event of a 410 Expired.
func checkExpired(t testing.TB, ev watch.Event) {
	t.Helper()
	status, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		t.Fatalf("got %s %T, want ERROR *metav1.Status", ev.Type, ev.Object)
	}
	if status.Code != 410 || status.Reason != metav1.StatusReasonExpired || status.Status != metav1.StatusFailure ||
		status.Message != "too old resource version: 5 (22381935)" {
		t.Errorf("ERROR %#v, want walwatch's 410 Expired", status)
	}
	// What a reflector does with it.
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) || err.Error() != status.Message {
		t.Errorf("apierrors.FromObject: %v, want the 410 Expired", err)
	}
}

func TestStreamEventsDecodeAsUnstructured(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			f := startFake(t, transport, nil)
			f.setHandler(f.stream(true,
				eventLine("ADDED", podJSON("web-0", "22381935")),
				eventLine("ADDED", podJSON("web-1", "22381935")),
				bookmarkEnd,
				eventLine("MODIFIED", podJSON("web-0", "22381941")),
				eventLine("DELETED", podJSON("web-1", "22381943")),
				bookmark,
				errorExpired,
			))
			w, err := f.client(t).Watch(watchCtx(t), podsRequest)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
			checkPod(t, next(t, w), watch.Added, "web-1", "22381935")
			checkBookmark(t, next(t, w), "22381940", true)
			checkPod(t, next(t, w), watch.Modified, "web-0", "22381941")
			checkPod(t, next(t, w), watch.Deleted, "web-1", "22381943")
			checkBookmark(t, next(t, w), "22381950", false)
			checkExpired(t, next(t, w))
			expectClosed(t, w)
		})
	}
}

func TestStreamEventsDecodeWithTheCallersDecoder(t *testing.T) {
	f := startFake(t, "unix", nil)
	f.setHandler(f.stream(true,
		eventLine("ADDED", widgetJSON("w-0", "100", 1)),
		eventLine("MODIFIED", widgetJSON("w-0", "101", 2)),
		`{"type":"BOOKMARK","object":{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"resourceVersion":"105","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n",
		eventLine("DELETED", widgetJSON("w-0", "110", 2)),
		errorExpired,
	))
	req := walwatch.WatchRequest{
		Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Decoder:  widgetDecoder(),
	}
	w, err := f.client(t).Watch(watchCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []struct {
		typ  watch.EventType
		rv   string
		size int
	}{{watch.Added, "100", 1}, {watch.Modified, "101", 2}} {
		ev := next(t, w)
		widget, ok := ev.Object.(*Widget)
		if ev.Type != want.typ || !ok {
			t.Fatalf("got %s %T, want %s *Widget", ev.Type, ev.Object, want.typ)
		}
		if widget.Name != "w-0" || widget.ResourceVersion != want.rv || widget.Spec.Size != want.size || widget.Kind != "Widget" {
			t.Errorf("got %#v, want w-0 at %s, size %d", widget, want.rv, want.size)
		}
	}
	ev := next(t, w)
	if _, ok := ev.Object.(*Widget); !ok {
		t.Errorf("bookmark %T, want *Widget", ev.Object)
	}
	checkBookmark(t, ev, "105", true)
	if ev := next(t, w); ev.Type != watch.Deleted || ev.Object.(*Widget).ResourceVersion != "110" {
		t.Errorf("got %s %#v, want DELETED w-0 at 110", ev.Type, ev.Object)
	}
	checkExpired(t, next(t, w)) // a *metav1.Status, whatever the decoder
	expectClosed(t, w)
}

// Chunk boundaries mean nothing: lines split anywhere (inside a key, an
// escape, a UTF-8 character, before the newline) and several lines in one
// chunk decode alike.
func TestStreamFramesSplitAndJoinedAnywhere(t *testing.T) {
	big := strings.Repeat("x", 300<<10) // a 300 KiB annotation: the decoder's buffer grows
	bigPod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"big","namespace":"default","resourceVersion":"22381942","annotations":{"a":"` + big + `"}}}`
	utf8Pod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"caf\u00e9-ü","namespace":"default","resourceVersion":"22381944"}}`
	lines := eventLine("ADDED", podJSON("web-0", "22381935")) +
		eventLine("ADDED", podJSON("web-1", "22381935")) +
		bookmarkEnd +
		eventLine("MODIFIED", bigPod) +
		eventLine("MODIFIED", utf8Pod) +
		errorExpired

	check := func(t *testing.T, w watch.Interface) {
		t.Helper()
		checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
		checkPod(t, next(t, w), watch.Added, "web-1", "22381935")
		checkBookmark(t, next(t, w), "22381940", true)
		ev := next(t, w)
		if u, ok := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Modified || !ok || u.GetName() != "big" || u.GetAnnotations()["a"] != big {
			t.Fatalf("got %s %T, want MODIFIED of the big pod", ev.Type, ev.Object)
		}
		ev = next(t, w)
		if u, ok := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Modified || !ok || u.GetName() != "café-ü" {
			t.Fatalf("got %s %#v, want MODIFIED café-ü", ev.Type, ev.Object)
		}
		checkExpired(t, next(t, w))
		expectClosed(t, w)
	}

	t.Run("one chunk", func(t *testing.T) {
		f := startFake(t, "unix", nil)
		f.setHandler(f.stream(true, lines))
		w, err := f.client(t).Watch(watchCtx(t), podsRequest)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		check(t, w)
	})

	// Chunks cut at odd places: inside "type", inside the ü of a key (its
	// two UTF-8 bytes apart), inside a \u escape, between } and \n, and the
	// big object across many chunks.
	var chunks []string
	rest := lines
	for _, cut := range []string{`{"ty`, `pe":"ADDED","obj`, `"web-0`, `"}`, `}`} {
		i := strings.Index(rest, cut)
		chunks = append(chunks, rest[:i+len(cut)])
		rest = rest[i+len(cut):]
	}
	for len(rest) > 0 {
		n := 7
		if strings.HasPrefix(rest, `{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"big"`) {
			n = 4093
		}
		if i := strings.Index(rest, "ü"); i >= 0 && i < n {
			n = i + 1 // between ü's two bytes
		}
		if i := strings.Index(rest, `\u00`); i >= 0 && i < n {
			n = i + 3
		}
		n = min(n, len(rest))
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	if strings.Join(chunks, "") != lines {
		t.Fatal("the chunks do not add up to the lines")
	}

	t.Run("odd chunks", func(t *testing.T) {
		for _, transport := range transports {
			f := startFake(t, transport, nil)
			f.setHandler(f.stream(true, chunks...))
			w, err := f.client(t).Watch(watchCtx(t), podsRequest)
			if err != nil {
				t.Fatal(err)
			}
			check(t, w)
			w.Stop()
		}
	})

	// The same, with every read the decoder makes cut short: a chunk that
	// arrives whole is still handed over in pieces, so the pieces are
	// certain to reach the decoder apart.
	for _, size := range []int{1, 3, 64} {
		t.Run(fmt.Sprintf("reads of %d bytes", size), func(t *testing.T) {
			f := startFake(t, "unix", nil)
			f.setHandler(f.stream(true, chunks...))
			c := newClient(t, walwatch.Config{Endpoint: f.Endpoint, Transport: shortReads(f.Socket, size)})
			w, err := c.Watch(watchCtx(t), podsRequest)
			if err != nil {
				t.Fatal(err)
			}
			check(t, w)
			w.Stop()
		})
	}
}

// shortReads is a transport to the socket whose response bodies return at
// most n bytes per Read.
func shortReads(socket string, n int) http.RoundTripper {
	base := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err == nil {
			resp.Body = &shortBody{ReadCloser: resp.Body, n: n}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type shortBody struct {
	io.ReadCloser
	n int
}

func (b *shortBody) Read(p []byte) (int, error) {
	return b.ReadCloser.Read(p[:min(len(p), b.n)])
}

// The server ending the stream (the final chunk, as at timeoutSeconds)
// closes the channel without an event.
func TestStreamEndClosesWithoutEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
	}{
		{"empty stream", nil},
		{"after events", []string{eventLine("ADDED", podJSON("web-0", "22381935")), bookmark}},
		// A stream cut inside a line is taken as its end, as client-go's
		// StreamWatcher takes an unexpected EOF: the reflector resumes from
		// its last RV.
		{"cut inside a line", []string{eventLine("ADDED", podJSON("web-0", "22381935")), bookmark[:40]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "unix", nil)
			f.setHandler(f.stream(true, tc.chunks...))
			w, err := f.client(t).Watch(watchCtx(t), podsRequest)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if len(tc.chunks) > 0 {
				checkPod(t, next(t, w), watch.Added, "web-0", "22381935")
			}
			if tc.name == "after events" {
				checkBookmark(t, next(t, w), "22381950", false)
			}
			expectClosed(t, w)
		})
	}
}

// An event that cannot be decoded is one watch.Error event, as client-go
// reports it (NewClientErrorReporter(500, "GET", "ClientWatchDecoding")),
// after the events before it; then the channel closes and the connection
// with it, though walwatch would go on.
func TestStreamUndecodableEventIsOneErrorEvent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		line    string
		decoder runtime.Decoder
		want    string // in the Status's message
	}{
		{name: "not JSON", line: `{"type":"ADDED","object":{"kind":"Pod"]}` + "\n", want: "invalid character"},
		{name: "not an object", line: "[1,2]\n", want: "unable to decode an event from the watch stream"},
		{name: "unknown type", line: eventLine("UPSERTED", podJSON("web-1", "22381936")), want: "UPSERTED"},
		{name: "object without kind", line: eventLine("ADDED", `{"apiVersion":"v1","metadata":{"name":"x"}}`), want: "Kind"},
		{name: "object not an object", line: eventLine("MODIFIED", `"web-1"`), want: "unable to decode watch event"},
		{name: "no object", line: `{"type":"DELETED"}` + "\n", want: "unable to decode watch event"},
		{name: "ERROR without a Status", line: eventLine("ERROR", podJSON("web-1", "22381936")), want: "ERROR event's Status"},
		{name: "bookmark without kind", line: `{"type":"BOOKMARK","object":{"apiVersion":"v1","metadata":{"resourceVersion":"7"}}}` + "\n", want: "Kind"},
		{name: "kind the typed decoder does not know", line: eventLine("ADDED", `{"kind":"Gadget","apiVersion":"example.com/v1","metadata":{"name":"g"}}`),
			decoder: widgetDecoder(), want: `no kind "Gadget" is registered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "unix", nil)
			first := eventLine("ADDED", podJSON("web-0", "22381935"))
			if tc.decoder != nil {
				first = eventLine("ADDED", widgetJSON("w-0", "22381935", 1))
			}
			// walwatch would go on after the line; the fake holds the
			// stream open and sends more, so only the client ends it.
			f.setHandler(f.stream(false, first, tc.line, eventLine("ADDED", podJSON("web-2", "22381937"))))
			req := podsRequest
			req.Decoder = tc.decoder
			w, err := f.client(t).Watch(watchCtx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if ev := next(t, w); ev.Type != watch.Added {
				t.Fatalf("got %s %#v, want the ADDED before the bad line", ev.Type, ev.Object)
			}
			ev := next(t, w)
			status, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok {
				t.Fatalf("got %s %#v, want ERROR *metav1.Status", ev.Type, ev.Object)
			}
			if status.Code != 500 || status.Reason != metav1.StatusReasonInternalError || status.Status != metav1.StatusFailure {
				t.Errorf("ERROR %#v, want 500 InternalError", status)
			}
			if !strings.Contains(status.Message, "unable to decode an event from the watch stream") {
				t.Errorf("ERROR message %q, want it to say the event could not be decoded", status.Message)
			}
			var cause *metav1.StatusCause
			if status.Details != nil {
				for i := range status.Details.Causes {
					if status.Details.Causes[i].Type == "ClientWatchDecoding" {
						cause = &status.Details.Causes[i]
					}
				}
			}
			if cause == nil || !strings.Contains(cause.Message, tc.want) {
				t.Errorf("ERROR details %#v, want a ClientWatchDecoding cause saying %q", status.Details, tc.want)
			}
			if err := apierrors.FromObject(ev.Object); !apierrors.IsInternalError(err) {
				t.Errorf("apierrors.FromObject: %v, want an internal error", err)
			}
			expectClosed(t, w)
			expectGone(t, f.only(t))
		})
	}
}
