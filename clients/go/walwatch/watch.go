package walwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchRequest is one watch: a resource, optionally of one member cluster
// and one namespace, with the Kubernetes list options of a watch.
type WatchRequest struct {
	// Resource is the watched resource. Any resource may be watched, whether
	// or not the table holds a row of it yet.
	Resource schema.GroupVersionResource
	// Cluster restricts the watch to one member cluster (the `cluster`
	// column). Empty: every cluster.
	Cluster string
	// Namespace restricts the watch to one namespace. Empty: all.
	Namespace string
	// Options are the watch's options, as a Kubernetes client sends them:
	// ResourceVersion, ResourceVersionMatch, SendInitialEvents,
	// AllowWatchBookmarks, TimeoutSeconds, LabelSelector, FieldSelector.
	// Watch is set whatever it holds. walwatch checks them as the apiserver
	// does and answers 400 or 422 to what the apiserver refuses.
	Options metav1.ListOptions
	// Decoder decodes the objects of ADDED, MODIFIED, DELETED and BOOKMARK
	// events. Nil means unstructured.UnstructuredJSONScheme: every object is
	// an *unstructured.Unstructured. An APIServer passes its storage codec.
	// ERROR events always carry a *metav1.Status.
	Decoder runtime.Decoder
}

// Path is the request's path on walwatch, escaped:
// [/clusters/{cluster}]/api/v1/[namespaces/{namespace}/]{resource} for the
// core group, /apis/{group}/{version}/... for the others.
func (r *WatchRequest) Path() string {
	var b strings.Builder
	if r.Cluster != "" {
		b.WriteString("/clusters/")
		b.WriteString(url.PathEscape(r.Cluster))
	}
	if r.Resource.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(url.PathEscape(r.Resource.Group))
		b.WriteString("/")
	}
	b.WriteString(url.PathEscape(r.Resource.Version))
	b.WriteString("/")
	if r.Namespace != "" {
		b.WriteString("namespaces/")
		b.WriteString(url.PathEscape(r.Namespace))
		b.WriteString("/")
	}
	b.WriteString(url.PathEscape(r.Resource.Resource))
	return b.String()
}

// Query is the request's query: Options as client-go encodes them
// (metav1.ParameterCodec), with watch=true.
func (r *WatchRequest) Query() (url.Values, error) {
	opts := r.Options
	opts.Watch = true
	query, err := metav1.ParameterCodec.EncodeParameters(&opts, metav1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("walwatch: encoding the watch options: %w", err)
	}
	return query, nil
}

func (r *WatchRequest) validate() error {
	if r.Resource.Version == "" || r.Resource.Resource == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("walwatch: watch of %q: a resource needs a version and a name", r.Resource.String()))
	}
	return nil
}

// Watch opens a watch. It returns once walwatch has answered with its 200
// header (for a watch without resourceVersion, or a WatchList, that is once
// the initial state's RV is known), or with an error:
//   - a non-200 answer is an *apierrors.StatusError carrying walwatch's
//     Status (400, 404, 422, 429, 503, 504 ...), so that apierrors'
//     predicates classify it as they would the apiserver's;
//   - walwatch not reachable is a plain error, as client-go's is for a
//     refused connection.
//
// The stream's ERROR event (a 410 Expired, a 500 while reading the initial
// state) is a watch.Error event whose object is a *metav1.Status; it is the
// last event of the stream. Bookmarks pass through as watch.Bookmark events,
// with the "k8s.io/initial-events-end" annotation of a WatchList's end.
//
// The result channel closes when walwatch ends the stream (timeoutSeconds,
// shutdown, an ERROR event), when Stop is called, or when ctx is done; none
// of these adds an event. An event that cannot be decoded becomes a
// watch.Error event (a *metav1.Status, code 500, reason InternalError, with
// a cause of type ClientWatchDecoding, as client-go reports it), and ends
// the watch.
func (c *Client) Watch(ctx context.Context, req WatchRequest) (watch.Interface, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	query, err := req.Query()
	if err != nil {
		return nil, err
	}
	resp, err := c.get(ctx, req.Path(), query)
	if err != nil {
		return nil, err
	}
	objects := req.Decoder
	if objects == nil {
		objects = unstructured.UnstructuredJSONScheme
	}
	body := &watchBody{ctx: ctx, body: resp.Body}
	frames := jsonserializer.Framer.NewFrameReader(body)
	decoder := &eventDecoder{
		events:  streaming.NewDecoder(frames, watchEventSerializer),
		objects: objects,
		body:    body,
	}
	// The reporter is what client-go's rest.Request.Watch passes: an
	// undecodable event becomes a watch.Error event, 500, ClientWatchDecoding.
	reporter := apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")
	return watch.NewStreamWatcher(decoder, reporter), nil
}

// watchEventSerializer decodes the frames of a stream as metav1.WatchEvent,
// as client-go's JSON stream serializer does.
var watchEventSerializer = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{})
}()

// watchBody is a watch's response body. A read that fails because the
// watch's context ended, or because Stop closed the body, reads as the end
// of the stream: StreamWatcher then closes its channel without an error
// event, where it would otherwise report "context canceled" or "read on
// closed body" as a watch.Error.
type watchBody struct {
	ctx     context.Context
	body    io.ReadCloser
	stopped atomic.Bool
	once    sync.Once
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF && (b.stopped.Load() || b.ctx.Err() != nil) {
		return n, io.EOF
	}
	return n, err
}

func (b *watchBody) Close() error {
	b.stopped.Store(true)
	var err error
	b.once.Do(func() { err = b.body.Close() })
	return err
}

// eventDecoder is a watch.Decoder over walwatch's stream: what client-go's
// rest/watch.Decoder does, except that an ERROR event's object is decoded
// as a *metav1.Status whatever the object decoder (client-go's would give an
// *unstructured.Unstructured with the dynamic client's decoder).
type eventDecoder struct {
	events  streaming.Decoder
	objects runtime.Decoder
	body    *watchBody
}

func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var got metav1.WatchEvent
	res, _, err := d.events.Decode(nil, &got)
	if err != nil {
		return "", nil, err
	}
	if res != &got {
		return "", nil, fmt.Errorf("unable to decode to metav1.Event")
	}
	switch t := watch.EventType(got.Type); t {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj, err := runtime.Decode(d.objects, got.Object.Raw)
		if err != nil {
			return "", nil, fmt.Errorf("unable to decode watch event: %v", err)
		}
		return t, obj, nil
	case watch.Error:
		status := &metav1.Status{}
		if err := json.Unmarshal(got.Object.Raw, status); err != nil || status.Kind != "Status" {
			return "", nil, fmt.Errorf("unable to decode the ERROR event's Status: %q", got.Object.Raw)
		}
		return t, status, nil
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", got.Type)
	}
}

func (d *eventDecoder) Close() {
	d.body.Close()
}
