package walwatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// The Status bodies walwatch answers, byte for byte as
// watchserver/k8s_status.cc writes them (field order included), with the
// messages of watchserver/watch_request.cc and http_session.cc.
const (
	status400         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"invalid value \"01\" for resourceVersion: want an unsigned decimal integer without leading zeros (a resourceVersion walwatch returned)","reason":"BadRequest","code":400}`
	status404         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`
	status405         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","code":405}`
	status409         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"commit order and snapshot visibility disagree near snapshot 100:105:101,103; list again","reason":"Conflict","code":409}`
	status410         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (22381935)","reason":"Expired","code":410}`
	status422         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided","field":"resourceVersionMatch"},{"reason":"FieldValueNotSupported","message":"Unsupported value: \"Exact\": supported values: \"NotOlderThan\"","field":"resourceVersionMatch"}]},"code":422}`
	status429         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many connections to walwatch (--max-connections 65280); try again later","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`
	status431         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"request header fields too large","reason":"RequestEntityTooLarge","code":431}`
	status500         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"reading the state failed: server closed the connection unexpectedly","reason":"InternalError","code":500}`
	status503         = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"walwatch is shutting down","reason":"ServiceUnavailable","code":503}`
	status504TooLarge = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 22381999, current: 22381936","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}`
	status504Busy     = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"walwatch's state readers did not answer in time; retry","reason":"Timeout","details":{"retryAfterSeconds":1},"code":504}`
)

// predicates are the apierrors classifiers an APIServer (and client-go's
// reflector and retry logic) use.
var predicates = map[string]func(error) bool{
	"IsBadRequest":                 apierrors.IsBadRequest,
	"IsNotFound":                   apierrors.IsNotFound,
	"IsMethodNotSupported":         apierrors.IsMethodNotSupported,
	"IsConflict":                   apierrors.IsConflict,
	"IsResourceExpired":            apierrors.IsResourceExpired,
	"IsGone":                       apierrors.IsGone,
	"IsInvalid":                    apierrors.IsInvalid,
	"IsTooManyRequests":            apierrors.IsTooManyRequests,
	"IsRequestEntityTooLargeError": apierrors.IsRequestEntityTooLargeError,
	"IsServiceUnavailable":         apierrors.IsServiceUnavailable,
	"IsTimeout":                    apierrors.IsTimeout,
	"IsInternalError":              apierrors.IsInternalError,
	"IsUnexpectedServerError":      apierrors.IsUnexpectedServerError,
	// k8s.io/apiserver/pkg/storage.IsTooLargeResourceVersion, which
	// client-go's reflector and the cacher test.
	"IsTooLargeResourceVersion": func(err error) bool {
		return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
	},
}

// checkPredicates fails the test unless exactly the predicates named in
// want hold for err.
func checkPredicates(t testing.TB, what string, err error, want ...string) {
	t.Helper()
	wanted := map[string]bool{}
	for _, w := range want {
		if predicates[w] == nil {
			t.Fatalf("no predicate %s", w)
		}
		wanted[w] = true
	}
	var wrong []string
	for name, p := range predicates {
		if p(err) != wanted[name] {
			wrong = append(wrong, fmt.Sprintf("%s=%v", name, p(err)))
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		t.Errorf("%s: %v: wrong classification %v (want true exactly %v)", what, err, wrong, want)
	}
}

// operations are the client's four requests, each run against the fake.
func operations(c *walwatch.Client) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Watch": func(ctx context.Context) error {
			w, err := c.Watch(ctx, walwatch.WatchRequest{
				Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
				Options:  metav1.ListOptions{ResourceVersion: "22381999"},
			})
			if err == nil {
				w.Stop()
				return errors.New("Watch returned a watch")
			}
			return err
		},
		"HandoffPostgres": func(ctx context.Context) error {
			rv, err := c.HandoffPostgres(ctx, walwatch.PostgresSnapshot{Snapshot: "100:105:101,103", InsertLSN: "0/16B3748"})
			if err == nil {
				return fmt.Errorf("HandoffPostgres returned %q", rv)
			}
			return err
		},
		"HandoffBinlog": func(ctx context.Context) error {
			rv, err := c.HandoffBinlog(ctx, walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 12345, ServerID: 1})
			if err == nil {
				return fmt.Errorf("HandoffBinlog returned %q", rv)
			}
			return err
		},
		"FreshRV": func(ctx context.Context) error {
			rv, err := c.FreshRV(ctx)
			if err == nil {
				return fmt.Errorf("FreshRV returned %q", rv)
			}
			return err
		},
	}
}

// Each Status walwatch answers comes back as the *apierrors.StatusError
// carrying it unchanged, classified as the apiserver's own would be.
func TestStatusAnswersAreStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       int
		body       string
		header     []string
		predicates []string
		delay      int // SuggestsClientDelay; 0: none
		// apiserver is the error the apiserver itself gives for the same
		// case, if it has one: walwatch's must match it (but for kind and
		// apiVersion, which the apiserver's serializer adds on the wire).
		apiserver *apierrors.StatusError
	}{
		{name: "400", code: 400, body: status400, predicates: []string{"IsBadRequest"}},
		{name: "404", code: 404, body: status404, predicates: []string{"IsNotFound"}},
		{name: "405", code: 405, body: status405, header: []string{"Allow", "GET"}, predicates: []string{"IsMethodNotSupported"}},
		{name: "409", code: 409, body: status409, predicates: []string{"IsConflict"}},
		{name: "410", code: 410, body: status410, predicates: []string{"IsResourceExpired"},
			apiserver: apierrors.NewResourceExpired("too old resource version: 5 (22381935)")},
		{name: "422", code: 422, body: status422, predicates: []string{"IsInvalid"}},
		{name: "429", code: 429, body: status429, header: []string{"Retry-After", "1"}, predicates: []string{"IsTooManyRequests"}, delay: 1},
		{name: "431", code: 431, body: status431, predicates: []string{"IsRequestEntityTooLargeError"}},
		{name: "500", code: 500, body: status500, predicates: []string{"IsInternalError"}},
		{name: "503", code: 503, body: status503, predicates: []string{"IsServiceUnavailable"}},
		{name: "504 too large", code: 504, body: status504TooLarge, header: []string{"Retry-After", "1"},
			predicates: []string{"IsTimeout", "IsTooLargeResourceVersion"}, delay: 1,
			apiserver: func() *apierrors.StatusError {
				// k8s.io/apiserver/pkg/storage.NewTooLargeResourceVersionError(22381999, 22381936, 1)
				err := apierrors.NewTimeoutError("Too large resource version: 22381999, current: 22381936", 1)
				err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
				return err
			}()},
		{name: "504 busy", code: 504, body: status504Busy, header: []string{"Retry-After", "1"}, predicates: []string{"IsTimeout"}, delay: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want metav1.Status
			if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
				t.Fatal(err)
			}
			f := startFake(t, "unix", answer(tc.code, tc.body, tc.header...))
			for op, run := range operations(f.client(t)) {
				err := run(context.Background())
				var status *apierrors.StatusError
				if !errors.As(err, &status) {
					t.Errorf("%s: %T %v, want an *apierrors.StatusError", op, err, err)
					continue
				}
				if !reflect.DeepEqual(status.ErrStatus, want) {
					t.Errorf("%s: Status\n%#v\nwant walwatch's\n%#v", op, status.ErrStatus, want)
				}
				if err.Error() != want.Message {
					t.Errorf("%s: error %q, want walwatch's message %q", op, err, want.Message)
				}
				checkPredicates(t, op, err, tc.predicates...)
				if tc.name == "504 too large" && !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
					t.Errorf("%s: %v: no ResourceVersionTooLarge cause", op, err)
				}
				delay, ok := apierrors.SuggestsClientDelay(err)
				if tc.delay == 0 && ok || tc.delay != 0 && (!ok || delay != tc.delay) {
					t.Errorf("%s: SuggestsClientDelay = %d, %v; want %d", op, delay, ok, tc.delay)
				}
				if tc.apiserver != nil {
					got := status.ErrStatus
					got.TypeMeta = metav1.TypeMeta{}
					if !reflect.DeepEqual(got, tc.apiserver.ErrStatus) {
						t.Errorf("%s: Status\n%#v\nthe apiserver's\n%#v", op, got, tc.apiserver.ErrStatus)
					}
				}
			}
			if n := len(f.requests()); n != 4 {
				t.Errorf("walwatch received %d requests, want 4 (one each, no retry)", n)
			}
		})
	}
}

// A Status without its code takes the answer's.
func TestStatusWithoutCodeTakesTheHTTPCode(t *testing.T) {
	f := startFake(t, "unix", answer(410, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"gone","reason":"Expired"}`))
	for op, run := range operations(f.client(t)) {
		err := run(context.Background())
		var status *apierrors.StatusError
		if !errors.As(err, &status) || status.ErrStatus.Code != 410 || !apierrors.IsResourceExpired(err) {
			t.Errorf("%s: %#v, want a 410 Expired StatusError", op, err)
		}
	}
}

// An answer whose body is not a Status (a proxy's page, walwatch's /readyz
// text, nothing) is the generic error client-go makes of it, classified by
// its HTTP code.
func TestNonStatusAnswersAreGenericStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		code        int
		body        string
		header      []string
		predicates  []string
		reason      metav1.StatusReason
		delay       int
		wantMessage string // in the error's message or its cause's
	}{
		{name: "503 plain text with Retry-After", code: 503, body: "catching up: 5 bytes of WAL behind\n",
			header:     []string{"Content-Type", "text/plain; charset=utf-8", "Retry-After", "3"},
			predicates: []string{"IsServiceUnavailable", "IsUnexpectedServerError"}, reason: metav1.StatusReasonServiceUnavailable, delay: 3,
			wantMessage: "catching up: 5 bytes of WAL behind"},
		{name: "502 HTML from a proxy", code: 502, body: "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
			header:     []string{"Content-Type", "text/html"},
			predicates: []string{"IsInternalError", "IsUnexpectedServerError"}, reason: metav1.StatusReasonInternalError,
			wantMessage: "502 Bad Gateway"},
		{name: "500 empty", code: 500, body: "",
			predicates: []string{"IsInternalError", "IsUnexpectedServerError"}, reason: metav1.StatusReasonInternalError,
			wantMessage: "Internal Server Error"},
		{name: "504 empty", code: 504, body: "",
			predicates: []string{"IsTimeout", "IsUnexpectedServerError"}, reason: metav1.StatusReasonTimeout},
		{name: "429 plain with Retry-After", code: 429, body: "slow down", header: []string{"Content-Type", "text/plain", "Retry-After", "7"},
			predicates: []string{"IsTooManyRequests", "IsUnexpectedServerError"}, reason: metav1.StatusReasonTooManyRequests, delay: 7,
			wantMessage: "slow down"},
		{name: "410 plain", code: 410, body: "gone",
			header:     []string{"Content-Type", "text/plain"},
			predicates: []string{"IsGone", "IsUnexpectedServerError"}, reason: metav1.StatusReasonUnknown, wantMessage: "gone"},
		{name: "404 JSON not a Status", code: 404, body: `{"kind":"Pod","apiVersion":"v1"}`,
			predicates: []string{"IsNotFound", "IsUnexpectedServerError"}, reason: metav1.StatusReasonNotFound, wantMessage: `{"kind":"Pod","apiVersion":"v1"}`},
		{name: "400 truncated Status", code: 400, body: status400[:60],
			predicates: []string{"IsBadRequest", "IsUnexpectedServerError"}, reason: metav1.StatusReasonBadRequest, wantMessage: status400[:60]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "unix", answer(tc.code, tc.body, tc.header...))
			for op, run := range operations(f.client(t)) {
				err := run(context.Background())
				var status *apierrors.StatusError
				if !errors.As(err, &status) {
					t.Errorf("%s: %T %v, want an *apierrors.StatusError", op, err, err)
					continue
				}
				if status.ErrStatus.Code != int32(tc.code) || status.ErrStatus.Reason != tc.reason || status.ErrStatus.Status != metav1.StatusFailure {
					t.Errorf("%s: code %d, reason %q, status %q; want %d, %q, Failure", op, status.ErrStatus.Code, status.ErrStatus.Reason, status.ErrStatus.Status, tc.code, tc.reason)
				}
				checkPredicates(t, op, err, tc.predicates...)
				delay, ok := apierrors.SuggestsClientDelay(err)
				if tc.delay == 0 && ok || tc.delay != 0 && (!ok || delay != tc.delay) {
					t.Errorf("%s: SuggestsClientDelay = %d, %v; want %d", op, delay, ok, tc.delay)
				}
				text := err.Error()
				if d := status.ErrStatus.Details; d != nil {
					for _, c := range d.Causes {
						text += " " + c.Message
					}
				}
				if !strings.Contains(text, tc.wantMessage) {
					t.Errorf("%s: %q and its causes do not carry %q", op, text, tc.wantMessage)
				}
			}
		})
	}
}

// Status answers over loopback TCP classify as over the socket.
func TestStatusAnswersOverTCP(t *testing.T) {
	f := startFake(t, "tcp", answer(504, status504TooLarge, "Retry-After", "1"))
	for op, run := range operations(f.client(t)) {
		err := run(context.Background())
		checkPredicates(t, op, err, "IsTimeout", "IsTooLargeResourceVersion")
	}
}
