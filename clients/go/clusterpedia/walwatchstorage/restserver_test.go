package walwatchstorage

// The REST path of Clusterpedia's APIServer, in process, over this storage:
// the REST layer of pkg/kubeapiserver/resourcerest (restStorage below),
// k8s.io/apiserver's handlers.ListResource with a real RequestScope, and
// Clusterpedia's request filters (the query, the cluster of
// /apis/clusterpedia.io/v1beta1/resources/clusters/{cluster}/..., the field
// selector taken off the URL), served by an httptest.Server that client-go
// talks to as kubectl would. rest_test.go holds the tests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"

	internal "github.com/clusterpedia-io/api/clusterpedia"
	"github.com/clusterpedia-io/api/clusterpedia/scheme"
	"github.com/clusterpedia-io/api/clusterpedia/v1beta1"
	"github.com/clusterpedia-io/clusterpedia/pkg/storage"
	"github.com/clusterpedia-io/clusterpedia/pkg/utils/request"

	"github.com/walwatch/walwatch/clients/go/internal/testenv"
	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// --- the REST layer: Clusterpedia's resourcerest.RESTStorage ---------------

// restStorage behaves as Clusterpedia v0.9.1's resourcerest.RESTStorage
// (that package does not compile against the api module the Go proxy
// serves): its options come from the request's raw query, decoded with
// Clusterpedia's parameter codec into internal.ListOptions, with the
// request's namespace and the path's cluster; an owner needs exactly one
// cluster; and Watch drops every error of the storage's Watch but
// MethodNotSupported, serving the watch.Interface it got.
type restStorage struct {
	storage   storage.ResourceStorage
	resource  schema.GroupResource
	newObject func() runtime.Object
	newList   func() runtime.Object
	table     rest.TableConvertor
}

var (
	_ rest.Storage = &restStorage{}
	_ rest.Lister  = &restStorage{}
	_ rest.Watcher = &restStorage{}
)

func (s *restStorage) New() runtime.Object     { return s.newObject() }
func (s *restStorage) NewList() runtime.Object { return s.newList() }
func (s *restStorage) Destroy()                {}

func (s *restStorage) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return s.table.ConvertToTable(ctx, object, tableOptions)
}

// listOptions is resolveListOptions: the query Clusterpedia's filter put in
// the context, the request's namespace and the path's cluster.
func (s *restStorage) listOptions(ctx context.Context) (*internal.ListOptions, error) {
	info, ok := genericrequest.RequestInfoFrom(ctx)
	if !ok {
		return nil, errors.New("missing RequestInfo")
	}
	opts := &internal.ListOptions{}
	if err := scheme.ParameterCodec.DecodeParameters(request.RequestQueryFrom(ctx), v1beta1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if info.Namespace != "" {
		opts.Namespaces = []string{info.Namespace}
	}
	if cluster := request.ClusterNameValue(ctx); cluster != "" {
		opts.ClusterNames = []string{cluster}
	}
	if (opts.OwnerUID != "" || opts.OwnerName != "") && len(opts.ClusterNames) != 1 {
		return nil, apierrors.NewBadRequest("If searching by owner uid or name, then the cluster must be specified")
	}
	if opts.WithRemainingCount == nil && remainingItemCount() {
		enabled := true
		opts.WithRemainingCount = &enabled
	}
	if request.ExtraMediaTypeKindValue(ctx) == "PartialObjectMetadataList" {
		opts.OnlyMetadata = true
	}
	return opts, nil
}

// remainingItemCount is the apiserver's RemainingItemCount feature, which
// Clusterpedia reads: on by default, and always on in the k8s.io releases
// that dropped it from the gate (GA).
func remainingItemCount() bool {
	for f := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if f == "RemainingItemCount" {
			return utilfeature.DefaultFeatureGate.Enabled(f)
		}
	}
	return true
}

func (s *restStorage) List(ctx context.Context, _ *metainternalversion.ListOptions) (runtime.Object, error) {
	opts, err := s.listOptions(ctx)
	if err != nil {
		return nil, err
	}
	list := s.newList()
	if err := s.storage.List(ctx, list, opts); err != nil {
		return nil, storeerr.InterpretListError(err, s.resource)
	}
	return list, nil
}

func (s *restStorage) Watch(ctx context.Context, _ *metainternalversion.ListOptions) (watch.Interface, error) {
	opts, err := s.listOptions(ctx)
	if err != nil {
		return nil, err
	}
	w, err := s.storage.Watch(ctx, opts)
	if apierrors.IsMethodNotSupported(err) {
		return nil, apierrors.NewMethodNotSupported(s.resource, "watch")
	}
	// Clusterpedia v0.9.1 drops every other error here.
	return w, nil
}

// --- serializers and scopes -------------------------------------------------

// typedScheme serves the core group typed, as Clusterpedia serves the
// resources its legacy scheme knows: corev1 (with metav1's types in v1) and
// meta.k8s.io's Table and PartialObjectMetadata.
var typedScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

var typedCodecs = serializer.NewCodecFactory(typedScheme)

// typedStorageCodec decodes the stored JSON into v1 objects: the storage
// codec of a typed resource whose memory version is its storage version.
var typedStorageCodec = func() runtime.Codec {
	info, ok := runtime.SerializerInfoForMediaType(typedCodecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("no JSON serializer")
	}
	return typedCodecs.CodecForVersions(info.Serializer, typedCodecs.UniversalDeserializer(), corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)
}()

// unstructuredNegotiator is a NegotiatedSerializer for unstructured objects,
// as apiextensions-apiserver (and Clusterpedia, for its custom resources)
// serve them: JSON, encoded through a versioning codec whose scheme holds
// metav1's types in the resource's group version (so that a Status or a
// WatchEvent gets its kind), and which types and converts Unstructured
// objects by their own apiVersion and kind.
type unstructuredNegotiator struct {
	scheme *runtime.Scheme
}

func (n unstructuredNegotiator) SupportedMediaTypes() []runtime.SerializerInfo {
	creater, typer := unstructuredscheme.NewUnstructuredCreator(), unstructuredTyper{n.scheme}
	plain := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, creater, typer, jsonserializer.SerializerOptions{})
	pretty := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, creater, typer, jsonserializer.SerializerOptions{Pretty: true})
	return []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       plain,
		PrettySerializer: pretty,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: plain, Framer: jsonserializer.Framer},
	}}
}

func (n unstructuredNegotiator) EncoderForVersion(encoder runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return versioning.NewCodec(encoder, nil, unstructuredConvertor{n.scheme}, unstructuredscheme.NewUnstructuredCreator(), unstructuredTyper{n.scheme}, nil, gv, nil, "unstructuredNegotiator")
}

func (n unstructuredNegotiator) DecoderToVersion(decoder runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return versioning.NewCodec(nil, decoder, unstructuredConvertor{n.scheme}, unstructuredscheme.NewUnstructuredCreator(), unstructuredTyper{n.scheme}, nil, nil, gv, "unstructuredNegotiator")
}

// unstructuredTyper types Unstructured objects by their apiVersion and kind,
// and everything else with the scheme.
type unstructuredTyper struct{ scheme *runtime.Scheme }

func (t unstructuredTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return unstructuredscheme.NewUnstructuredObjectTyper().ObjectKinds(obj)
	}
	return t.scheme.ObjectKinds(obj)
}

func (t unstructuredTyper) Recognizes(gvk schema.GroupVersionKind) bool {
	return t.scheme.Recognizes(gvk) || unstructuredscheme.NewUnstructuredObjectTyper().Recognizes(gvk)
}

// unstructuredConvertor keeps an Unstructured object in its own version
// (there is one version here, and nothing to convert), and converts the
// rest with the scheme.
type unstructuredConvertor struct{ scheme *runtime.Scheme }

func (c unstructuredConvertor) Convert(in, out, context interface{}) error {
	return c.scheme.Convert(in, out, context)
}

func (c unstructuredConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if _, ok := in.(runtime.Unstructured); !ok {
		return c.scheme.ConvertToVersion(in, target)
	}
	gvk := in.GetObjectKind().GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok || want != gvk {
		return nil, fmt.Errorf("unstructured %v: no conversion to %v", gvk, target)
	}
	return in, nil
}

func (c unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
}

// --- the server -------------------------------------------------------------

// restResource is one resource the test APIServer serves.
type restResource struct {
	testenv.Resource
	// Typed: decoded into corev1 types from the stored JSON and served with
	// typedCodecs, as Clusterpedia serves the built-in resources; else
	// unstructured, as it serves custom resources.
	Typed bool
}

// clusterPathPrefix is Clusterpedia's per-cluster resources path; what
// follows the cluster's name is a Kubernetes API path.
const clusterPathPrefix = "/apis/clusterpedia.io/v1beta1/resources/clusters/"

// restEndpoint is one resource's RequestScope and REST storage.
type restEndpoint struct {
	scope      *handlers.RequestScope
	storage    *restStorage
	namespaced bool
}

// restServer routes /api and /apis requests to ListResource, as
// Clusterpedia's ResourceHandler does for list and watch.
type restServer struct {
	endpoints map[schema.GroupVersionResource]*restEndpoint
	inner     http.Handler
}

// minRequestTimeout is the APIServer's --min-request-timeout: a watch
// without timeoutSeconds lasts between it and twice it.
const minRequestTimeout = 30 * time.Minute

func newRESTServer(t testing.TB, factory storage.StorageFactory, resources []restResource) *restServer {
	t.Helper()
	s := &restServer{endpoints: map[schema.GroupVersionResource]*restEndpoint{}}
	for _, r := range resources {
		gvr := r.GVR
		gvk := gvr.GroupVersion().WithKind(r.Kind)
		listGVK := gvr.GroupVersion().WithKind(r.Kind + "List")
		cfg := &storage.ResourceStorageConfig{}
		cfg.Namespaced = r.Namespaced
		cfg.GroupResource = gvr.GroupResource()
		cfg.StorageResource = gvr
		cfg.MemoryResource = gvr
		st := &restStorage{resource: gvr.GroupResource(), table: rest.NewDefaultTableConvertor(gvr.GroupResource())}
		scope := &handlers.RequestScope{
			Namer: handlers.ContextBasedNaming{
				Namer:         runtime.Namer(meta.NewAccessor()),
				ClusterScoped: !r.Namespaced,
			},
			Resource:         gvr,
			Kind:             gvk,
			MetaGroupVersion: metav1.SchemeGroupVersion,
			TableConvertor:   st.table,
		}
		if r.Typed {
			cfg.Codec = typedStorageCodec
			st.newObject = func() runtime.Object { obj, _ := typedScheme.New(gvk); return obj }
			st.newList = func() runtime.Object { obj, _ := typedScheme.New(listGVK); return obj }
			if _, err := typedScheme.New(listGVK); err != nil {
				t.Fatalf("the typed scheme has no %v: %v", listGVK, err)
			}
			scope.Serializer = typedCodecs
			scope.ParameterCodec = runtime.NewParameterCodec(typedScheme)
			scope.Creater, scope.Convertor, scope.Defaulter, scope.Typer = typedScheme, typedScheme, typedScheme, typedScheme
		} else {
			cfg.Codec = unstructured.UnstructuredJSONScheme
			st.newObject = func() runtime.Object {
				obj := &unstructured.Unstructured{}
				obj.SetGroupVersionKind(gvk)
				return obj
			}
			st.newList = func() runtime.Object {
				obj := &unstructured.UnstructuredList{}
				obj.SetGroupVersionKind(listGVK)
				return obj
			}
			sch := runtime.NewScheme()
			metav1.AddToGroupVersion(sch, gvr.GroupVersion())
			if err := metav1.AddMetaToScheme(sch); err != nil {
				t.Fatal(err)
			}
			scope.Serializer = unstructuredNegotiator{sch}
			scope.ParameterCodec = runtime.NewParameterCodec(sch)
			scope.Creater = unstructuredscheme.NewUnstructuredCreator()
			scope.Convertor = unstructuredConvertor{sch}
			scope.Defaulter = sch
			scope.Typer = unstructuredTyper{sch}
		}
		rs, err := factory.NewResourceStorage(cfg)
		if err != nil {
			t.Fatalf("NewResourceStorage(%v): %v", gvr, err)
		}
		st.storage = rs
		s.endpoints[gvr] = &restEndpoint{scope: scope, storage: st, namespaced: r.Namespaced}
	}
	resolver := &genericrequest.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
	// Clusterpedia's BuildHandlerChain: the field selector off the URL
	// (kept in the context's query), then the request info; and the
	// received timestamp the generic apiserver's chain sets (the WatchList
	// latency metric reads it).
	s.inner = filters.WithRequestReceivedTimestamp(
		removeFieldSelector(filters.WithRequestInfo(http.HandlerFunc(s.serveResource), resolver)))
	return s
}

// ServeHTTP is Clusterpedia's outer chain: the request's query into the
// context (filters.WithRequestQuery), and for the per-cluster path the
// cluster into the context and the prefix off the path, as the
// resources/clusters subresource's Connect does.
func (s *restServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ctx := request.WithRequestQuery(req.Context(), req.URL.Query())
	if rest, ok := strings.CutPrefix(req.URL.Path, clusterPathPrefix); ok {
		cluster, path, _ := strings.Cut(rest, "/")
		if cluster == "" || !strings.HasPrefix(path, "api") {
			http.NotFound(w, req)
			return
		}
		ctx = request.WithClusterName(ctx, cluster)
		req = req.Clone(ctx)
		req.URL.Path = "/" + path
		req.URL.RawPath = ""
	}
	s.inner.ServeHTTP(w, req.WithContext(ctx))
}

func removeFieldSelector(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !request.HasRequestQuery(req.Context()) {
			req = req.WithContext(request.WithRequestQuery(req.Context(), req.URL.Query()))
		}
		if q := req.URL.Query(); q.Get("fieldSelector") != "" {
			q.Del("fieldSelector")
			req = req.Clone(req.Context())
			req.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, req)
	})
}

// serveResource is ResourceHandler.ServeHTTP's list and watch.
func (s *restServer) serveResource(w http.ResponseWriter, req *http.Request) {
	info, ok := genericrequest.RequestInfoFrom(req.Context())
	if !ok || !info.IsResourceRequest {
		http.NotFound(w, req)
		return
	}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	e, ok := s.endpoints[gvr]
	if !ok || info.Subresource != "" || (info.Namespace != "" && !e.namespaced) {
		responsewriters.ErrorNegotiated(apierrors.NewNotFound(gvr.GroupResource(), info.Name), typedCodecs, gvr.GroupVersion(), w, req)
		return
	}
	switch info.Verb {
	case "list", "watch":
		if mt, ok := negotiation.NegotiateMediaTypeOptions(req.Header.Get("Accept"), e.scope.Serializer.SupportedMediaTypes(), e.scope); ok && mt.Convert != nil {
			req = req.WithContext(request.WithExtraMediaTypeKind(req.Context(), mt.Convert.Kind))
		}
		if info.Verb == "list" {
			handlers.ListResource(e.storage, nil, e.scope, false, minRequestTimeout).ServeHTTP(w, req)
		} else {
			handlers.ListResource(e.storage, e.storage, e.scope, true, minRequestTimeout).ServeHTTP(w, req)
		}
	default:
		responsewriters.ErrorNegotiated(apierrors.NewMethodNotSupported(gvr.GroupResource(), info.Verb), e.scope.Serializer, gvr.GroupVersion(), w, req)
	}
}

// --- the environment of one test ------------------------------------------

// restEnv is one test's database, walwatch, storage, APIServer and client.
type restEnv struct {
	DB       *testenv.DB
	Walwatch *testenv.Walwatch
	Factory  *StorageFactory
	Server   *httptest.Server
	// Client is client-go's dynamic client on the APIServer.
	Client dynamic.Interface
	// FirstAnswer is Client without client-go's retries: client-go asks
	// again, up to 10 times, when a 5xx comes with Retry-After (a 504 with
	// retryAfterSeconds does), and a test of the server's answer wants the
	// first one.
	FirstAnswer dynamic.Interface
}

type restEnvOptions struct {
	// HeldListIdle is walwatch.heldListIdle; 0: the default.
	HeldListIdle time.Duration
	// HandoffTimeout is walwatch.handoffTimeout; 0: the default.
	HandoffTimeout time.Duration
	Walwatch       testenv.WalwatchOptions
}

// The resources the tests serve: deployments unstructured, pods typed.
var (
	restDeployments = restResource{Resource: testenv.Deployments}
	restPods        = restResource{Resource: testenv.Pods, Typed: true}
)

func newRESTEnv(t *testing.T, db *testenv.DB, opts restEnvOptions) *restEnv {
	t.Helper()
	return newRESTFrontEnd(t, db, testenv.StartWalwatch(t, db, opts.Walwatch), opts)
}

// newRESTFrontEnd is a storage and an APIServer of their own (opts' storage
// settings) on a walwatch already running for db, as a second APIServer
// replica beside the first.
func newRESTFrontEnd(t *testing.T, db *testenv.DB, ww *testenv.Walwatch, opts restEnvOptions) *restEnv {
	t.Helper()
	typ := "postgres"
	if db.Dialect == walwatch.MySQL {
		typ = "mysql"
	}
	text := fmt.Sprintf("type: %s\ndsn: %s\nwalwatch:\n  endpoint: %s\n", typ, strconv.Quote(db.DSN), strconv.Quote(ww.Endpoint))
	if opts.HeldListIdle > 0 {
		text += fmt.Sprintf("  heldListIdle: %s\n", opts.HeldListIdle)
	}
	if opts.HandoffTimeout > 0 {
		text += fmt.Sprintf("  handoffTimeout: %s\n", opts.HandoffTimeout)
	}
	// Through ParseConfig, as Clusterpedia's --storage-config file is read.
	cfg, err := ParseConfig([]byte(text))
	if err != nil {
		t.Fatalf("ParseConfig:\n%s\n%v", text, err)
	}
	factory, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := factory.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	srv := httptest.NewServer(newRESTServer(t, factory, []restResource{restDeployments, restPods}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // ends the watches still open
		srv.Close()
	})
	return &restEnv{
		DB: db, Walwatch: ww, Factory: factory, Server: srv,
		Client:      newDynamicClient(t, &restclient.Config{Host: srv.URL}),
		FirstAnswer: newDynamicClient(t, &restclient.Config{Host: srv.URL, WrapTransport: withoutRetryAfter}),
	}
}

func newDynamicClient(t testing.TB, cfg *restclient.Config) dynamic.Interface {
	t.Helper()
	cfg.QPS = -1 // no client-side rate limit
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic.NewForConfig: %v", err)
	}
	return c
}

// withoutRetryAfter drops the answers' Retry-After header, on which
// client-go retries.
func withoutRetryAfter(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Header.Del("Retry-After")
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// ClusterClient is a dynamic client on Clusterpedia's per-cluster path
// (/apis/clusterpedia.io/v1beta1/resources/clusters/{cluster}), as
// Clusterpedia's documentation sets a kubeconfig's server.
func (e *restEnv) ClusterClient(t testing.TB, cluster string) dynamic.Interface {
	return newDynamicClient(t, &restclient.Config{Host: e.Server.URL + clusterPathPrefix + cluster})
}

// --- comparing with the table ----------------------------------------------

// restItem is an object as the table and the REST path both name it.
type restItem struct {
	Cluster, Namespace, Name, UID string
	// MemberRV is the member cluster's resourceVersion: the row's
	// metadata.resourceVersion, the served object's
	// MemberResourceVersionAnnotation.
	MemberRV string
}

func (i restItem) String() string {
	return fmt.Sprintf("%s/%s/%s(uid %s, rv %s)", i.Cluster, i.Namespace, i.Name, i.UID, i.MemberRV)
}

func sortItems(items []restItem) []restItem {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return items
}

// rowItems reads the table's rows of gvr (cluster and namespace "" for
// all), and for each row its object with the list's view of it: the
// member RV in MemberResourceVersionAnnotation and rv as its
// resourceVersion (rv "": the member RV left in place).
func rowItems(t testing.TB, db *testenv.DB, gvr schema.GroupVersionResource, cluster, namespace string) ([]restItem, map[restItem]map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := testenv.SelectRows(ctx, db, gvr, cluster, namespace)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]restItem, 0, len(rows))
	objects := map[restItem]map[string]any{}
	for _, r := range rows {
		var obj map[string]any
		if err := json.Unmarshal(r.Object, &obj); err != nil {
			t.Fatalf("row %s/%s/%s: %v", r.Cluster, r.Namespace, r.Name, err)
		}
		u := unstructured.Unstructured{Object: obj}
		item := restItem{Cluster: r.Cluster, Namespace: r.Namespace, Name: r.Name, UID: r.UID, MemberRV: u.GetResourceVersion()}
		items = append(items, item)
		objects[item] = obj
	}
	return sortItems(items), objects
}

// servedItem is what the REST path says of one served object, and the
// object as the table held it (the member RV put back, the annotation
// taken off), for comparing the whole object with the row.
func servedItem(t testing.TB, obj *unstructured.Unstructured) (restItem, map[string]any) {
	t.Helper()
	annotations := obj.GetAnnotations()
	member, ok := annotations[MemberResourceVersionAnnotation]
	if !ok {
		t.Fatalf("%s/%s: no %s annotation: %v", obj.GetNamespace(), obj.GetName(), MemberResourceVersionAnnotation, annotations)
	}
	item := restItem{
		Cluster:   annotations[testenv.ClusterNameAnnotation],
		Namespace: obj.GetNamespace(),
		Name:      obj.GetName(),
		UID:       string(obj.GetUID()),
		MemberRV:  member,
	}
	stored := obj.DeepCopy()
	a := stored.GetAnnotations()
	delete(a, MemberResourceVersionAnnotation)
	stored.SetAnnotations(a)
	stored.SetResourceVersion(member)
	// Through JSON, so that numbers are float64 as in the row's.
	data, err := json.Marshal(stored.Object)
	if err != nil {
		t.Fatal(err)
	}
	var object map[string]any
	if err := json.Unmarshal(data, &object); err != nil {
		t.Fatal(err)
	}
	return item, object
}

// checkListMatchesRows fails t unless the list's items are the rows, each
// with the list's RV and, for an unstructured resource, the row's object
// exactly (a typed one goes through corev1's types, which drop and add
// fields).
func checkListMatchesRows(t testing.TB, what string, items []unstructured.Unstructured, listRV string, rows []restItem, objects map[restItem]map[string]any, wholeObjects bool) {
	t.Helper()
	var got []restItem
	differ := 0
	for i := range items {
		if rv := items[i].GetResourceVersion(); rv != listRV {
			t.Errorf("%s: item %s/%s has resourceVersion %q, want the list's %q", what, items[i].GetNamespace(), items[i].GetName(), rv, listRV)
		}
		item, stored := servedItem(t, &items[i])
		got = append(got, item)
		if want, ok := objects[item]; ok && wholeObjects && !reflect.DeepEqual(want, stored) {
			if differ++; differ == 1 {
				t.Errorf("%s: %v is not the row's object:\n got  %v\n want %v", what, item, stored, want)
			}
		}
	}
	if differ > 1 {
		t.Errorf("%s: %d items in all are not their row's object", what, differ)
	}
	sortItems(got)
	if !reflect.DeepEqual(got, rows) && !(len(got) == 0 && len(rows) == 0) {
		t.Errorf("%s: the items are not the table's rows:\n got  %v\n want %v", what, got, rows)
	}
}

// --- watching ----------------------------------------------------------------

// restEvent is one event as a client sees it.
type restEvent struct {
	Type watch.EventType
	Item restItem // not for BOOKMARK and ERROR
	RV   string
	Obj  *unstructured.Unstructured // not for ERROR
	Err  error                      // ERROR: the Status as an error
}

func (e restEvent) String() string {
	switch e.Type {
	case watch.Error:
		return fmt.Sprintf("ERROR %v", e.Err)
	case watch.Bookmark:
		return fmt.Sprintf("BOOKMARK rv %s %v", e.RV, e.Obj.GetAnnotations())
	}
	return fmt.Sprintf("%s %v at %s", e.Type, e.Item, e.RV)
}

// eventBound bounds the wait for an event that must come; generous for a
// loaded machine. It is never the measure of anything.
const eventBound = 60 * time.Second

// nextEvent waits for w's next event; it fails t if the watch ends or none
// comes within eventBound.
func nextEvent(t testing.TB, w watch.Interface) restEvent {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("the watch ended; an event was due")
		}
		return toRESTEvent(t, ev)
	case <-time.After(eventBound):
		t.Fatalf("no event within %v", eventBound)
	}
	return restEvent{}
}

func toRESTEvent(t testing.TB, ev watch.Event) restEvent {
	t.Helper()
	if ev.Type == watch.Error {
		return restEvent{Type: ev.Type, Err: apierrors.FromObject(ev.Object)}
	}
	obj, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("a %s event carries a %T", ev.Type, ev.Object)
	}
	e := restEvent{Type: ev.Type, RV: obj.GetResourceVersion(), Obj: obj}
	if ev.Type != watch.Bookmark {
		e.Item, _ = servedItem(t, obj)
	}
	return e
}

// nextNonBookmark is nextEvent, skipping bookmarks.
func nextNonBookmark(t testing.TB, w watch.Interface) restEvent {
	t.Helper()
	for {
		if e := nextEvent(t, w); e.Type != watch.Bookmark {
			return e
		}
	}
}

// errorEvent waits for the watch's first event, which must be an ERROR
// (Clusterpedia serves the storage's error as one), and returns its Status.
func errorEvent(t testing.TB, w watch.Interface) *apierrors.StatusError {
	t.Helper()
	e := nextEvent(t, w)
	if e.Type != watch.Error {
		t.Fatalf("got %v, want an ERROR event", e)
	}
	var status *apierrors.StatusError
	if !errors.As(e.Err, &status) {
		t.Fatalf("the ERROR event's object is not a Status: %v", e.Err)
	}
	return status
}

// rvNumber parses a walwatch RV.
func rvNumber(t testing.TB, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a walwatch RV: %v", rv, err)
	}
	return n
}
