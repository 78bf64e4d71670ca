package walwatch_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// rvAnswer is walwatch's 200 to handoff and freshrv
// (watchserver/k8s_status.cc, ResourceVersionJson).
func rvAnswer(rv string) string {
	return `{"kind":"ResourceVersion","apiVersion":"walwatch.clusterpedia.io/v1","resourceVersion":"` + rv + `"}`
}

func newClientFor(t testing.TB, f *fakeWalwatch, requestTimeout time.Duration) *walwatch.Client {
	t.Helper()
	return newClient(t, walwatch.Config{Endpoint: f.Endpoint, RequestTimeout: requestTimeout})
}

func TestHandoffAndFreshRVRequests(t *testing.T) {
	for _, tc := range []struct {
		name       string
		call       func(*walwatch.Client) (string, error)
		wantTarget string // as sent
		wantValues url.Values
	}{
		{
			name: "postgres with insertLSN",
			call: func(c *walwatch.Client) (string, error) {
				return c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:105:101,103", InsertLSN: "0/16B3748"})
			},
			wantTarget: "/walwatch/v1/handoff?insertLSN=0%2F16B3748&snapshot=100%3A105%3A101%2C103",
			wantValues: url.Values{"snapshot": {"100:105:101,103"}, "insertLSN": {"0/16B3748"}},
		},
		{
			name: "postgres without insertLSN",
			call: func(c *walwatch.Client) (string, error) {
				return c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:100:"})
			},
			wantTarget: "/walwatch/v1/handoff?snapshot=100%3A100%3A",
			wantValues: url.Values{"snapshot": {"100:100:"}},
		},
		{
			name: "binlog with serverId",
			call: func(c *walwatch.Client) (string, error) {
				return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 12345, ServerID: 1})
			},
			wantTarget: "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003&binlogPosition=12345&serverId=1",
			wantValues: url.Values{"binlogFile": {"mariadb-bin.000003"}, "binlogPosition": {"12345"}, "serverId": {"1"}},
		},
		{
			name: "binlog without serverId",
			call: func(c *walwatch.Client) (string, error) {
				return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 12345})
			},
			wantTarget: "/walwatch/v1/handoff?binlogFile=mariadb-bin.000003&binlogPosition=12345",
			wantValues: url.Values{"binlogFile": {"mariadb-bin.000003"}, "binlogPosition": {"12345"}},
		},
		{
			name: "binlog at the largest position and server id",
			call: func(c *walwatch.Client) (string, error) {
				return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "my bin+log.000003", Position: 4294967295, ServerID: 4294967295})
			},
			wantTarget: "/walwatch/v1/handoff?binlogFile=my+bin%2Blog.000003&binlogPosition=4294967295&serverId=4294967295",
			wantValues: url.Values{"binlogFile": {"my bin+log.000003"}, "binlogPosition": {"4294967295"}, "serverId": {"4294967295"}},
		},
		{
			name: "freshrv",
			call: func(c *walwatch.Client) (string, error) {
				return c.FreshRV(context.Background())
			},
			wantTarget: "/walwatch/v1/freshrv",
			wantValues: url.Values{},
		},
	} {
		for _, transport := range transports {
			t.Run(tc.name+"/"+transport, func(t *testing.T) {
				f := startFake(t, transport, answer(200, rvAnswer("22381936")))
				rv, err := tc.call(f.client(t))
				if err != nil || rv != "22381936" {
					t.Fatalf("got %q, %v; want 22381936", rv, err)
				}
				got := f.only(t)
				if got.Method != http.MethodGet || got.Target != tc.wantTarget {
					t.Errorf("sent %s %s, want GET %s", got.Method, got.Target, tc.wantTarget)
				}
				values, err := url.ParseQuery(got.RawQuery)
				if err != nil {
					t.Fatal(err)
				}
				if values.Encode() != tc.wantValues.Encode() {
					t.Errorf("query decodes to %v, want %v", values, tc.wantValues)
				}
				if accept := got.Header.Get("Accept"); accept != "application/json" {
					t.Errorf("Accept: %q, want application/json", accept)
				}
			})
		}
	}
}

func TestResourceVersionAnswers(t *testing.T) {
	for _, rv := range []string{"0", "1", "22381936", "10000030000012345", "18446744073709551615"} {
		body := rvAnswer(rv)
		if rv == "22381936" {
			// A handoff's latestResourceVersion is read, and not taken for
			// the RV.
			body = strings.TrimSuffix(body, "}") + `,"latestResourceVersion":"22382111"}`
		}
		f := startFake(t, "unix", answer(200, body))
		c := f.client(t)
		for name, call := range map[string]func() (string, error){
			"HandoffPostgres": func() (string, error) {
				return c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:100:"})
			},
			"HandoffBinlog": func() (string, error) {
				return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 4})
			},
			"FreshRV": func() (string, error) { return c.FreshRV(context.Background()) },
		} {
			if got, err := call(); err != nil || got != rv {
				t.Errorf("%s answered %s: got %q, %v; want %q", name, rv, got, err, rv)
			}
		}
	}
}

// A 200 that does not carry a ResourceVersion with a decimal uint64 is an
// error, not an RV, and not a Status.
func TestBadResourceVersionAnswersAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"empty body", ""},
		{"plain text", "ok"},
		{"truncated", rvAnswer("22381936")[:40]},
		{"a Status", status410},
		{"another kind", `{"kind":"Pod","apiVersion":"v1","resourceVersion":"22381936"}`},
		{"no kind", `{"apiVersion":"walwatch.clusterpedia.io/v1","resourceVersion":"22381936"}`},
		{"an array", `[` + rvAnswer("22381936") + `]`},
		{"RV a number", `{"kind":"ResourceVersion","apiVersion":"walwatch.clusterpedia.io/v1","resourceVersion":22381936}`},
		{"RV missing", `{"kind":"ResourceVersion","apiVersion":"walwatch.clusterpedia.io/v1"}`},
		{"RV empty", rvAnswer("")},
		{"RV not a number", rvAnswer("abc")},
		{"RV negative", rvAnswer("-1")},
		{"RV with a sign", rvAnswer("+1")},
		{"RV with a space", rvAnswer(" 1")},
		{"RV hexadecimal", rvAnswer("0x10")},
		{"RV a fraction", rvAnswer("1.5")},
		{"RV an LSN", rvAnswer("0/16B3748")},
		{"RV over uint64", rvAnswer("18446744073709551616")},
		// walwatch refuses a watch from an RV with leading zeros (400:
		// one RV has one spelling), so none can be handed out.
		{"RV with a leading zero", rvAnswer("022381936")},
		// latestResourceVersion, when there, is an RV at or above it.
		{"latest below the RV", strings.TrimSuffix(rvAnswer("22381936"), "}") + `,"latestResourceVersion":"22381935"}`},
		{"latest not a number", strings.TrimSuffix(rvAnswer("22381936"), "}") + `,"latestResourceVersion":"x"}`},
		{"latest with a leading zero", strings.TrimSuffix(rvAnswer("22381936"), "}") + `,"latestResourceVersion":"022381937"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "unix", answer(200, tc.body))
			c := f.client(t)
			for name, call := range map[string]func() (string, error){
				"HandoffPostgres": func() (string, error) {
					return c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:100:"})
				},
				"HandoffBinlog": func() (string, error) {
					return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 4})
				},
				"FreshRV": func() (string, error) { return c.FreshRV(context.Background()) },
			} {
				rv, err := call()
				if err == nil {
					t.Errorf("%s: got RV %q, want an error", name, rv)
					continue
				}
				if rv != "" {
					t.Errorf("%s: got RV %q with error %v, want none", name, rv, err)
				}
				var status apierrors.APIStatus
				if errors.As(err, &status) {
					t.Errorf("%s: %v is a Status, want a plain error", name, err)
				}
				if !strings.HasPrefix(err.Error(), "walwatch: GET /walwatch/v1/") {
					t.Errorf("%s: %q, want it to name the request", name, err)
				}
			}
		})
	}
}

// RequestTimeout applies to a handoff whose context has no deadline, while
// walwatch works the answer out and while it sends it; walwatch sees the
// connection closed (which frees its state reader).
func TestRequestTimeoutBoundsHandoffs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(f *fakeWalwatch) func(w http.ResponseWriter, r *http.Request, rec *recorded)
	}{
		{"no answer", func(f *fakeWalwatch) func(w http.ResponseWriter, r *http.Request, rec *recorded) {
			return func(w http.ResponseWriter, r *http.Request, rec *recorded) { f.block(r, rec) }
		}},
		{"half an answer", func(f *fakeWalwatch) func(w http.ResponseWriter, r *http.Request, rec *recorded) {
			return func(w http.ResponseWriter, r *http.Request, rec *recorded) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				writeChunk(w, rvAnswer("22381936")[:30])
				f.block(r, rec)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "unix", nil)
			f.setHandler(tc.handler(f))
			c := newClientFor(t, f, 50*time.Millisecond)
			for name, call := range map[string]func() (string, error){
				"HandoffPostgres": func() (string, error) {
					return c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "100:100:"})
				},
				"HandoffBinlog": func() (string, error) {
					return c.HandoffBinlog(context.Background(), walwatch.BinlogSnapshot{File: "mariadb-bin.000003", Position: 4})
				},
				"FreshRV": func() (string, error) { return c.FreshRV(context.Background()) },
			} {
				result := make(chan error, 1)
				go func() {
					_, err := call()
					result <- err
				}()
				select {
				case err := <-result:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: %v, want context.DeadlineExceeded", name, err)
					}
				case <-time.After(bound):
					t.Fatalf("%s: no answer within %v: RequestTimeout did not apply", name, bound)
				}
				expectGone(t, f.last(t))
			}
		})
	}
}

// A context with a deadline of its own is not cut short by RequestTimeout.
func TestRequestTimeoutDoesNotShortenTheCallersDeadline(t *testing.T) {
	const timeout = 20 * time.Millisecond
	f := startFake(t, "unix", func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		time.Sleep(10 * timeout) // past RequestTimeout
		answer(200, rvAnswer("22381936"))(w, r, rec)
	})
	c := newClientFor(t, f, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if rv, err := c.FreshRV(ctx); err != nil || rv != "22381936" {
		t.Errorf("FreshRV: %q, %v; want 22381936", rv, err)
	}
	if rv, err := c.HandoffPostgres(ctx, walwatch.PostgresSnapshot{Snapshot: "100:100:"}); err != nil || rv != "22381936" {
		t.Errorf("HandoffPostgres: %q, %v; want 22381936", rv, err)
	}
}

// A cancelled context ends a handoff with its error.
func TestHandoffCancelled(t *testing.T) {
	f := startFake(t, "unix", nil)
	arrived := make(chan struct{}, 1)
	f.setHandler(func(w http.ResponseWriter, r *http.Request, rec *recorded) {
		arrived <- struct{}{}
		f.block(r, rec)
	})
	c := f.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := c.HandoffPostgres(ctx, walwatch.PostgresSnapshot{Snapshot: "100:100:"})
		result <- err
	}()
	select {
	case <-arrived:
	case <-time.After(bound):
		t.Fatalf("walwatch received no request within %v", bound)
	}
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("HandoffPostgres: %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Fatalf("HandoffPostgres did not return within %v of the cancellation", bound)
	}
	expectGone(t, f.only(t))
}

// Handoffs and fresh RVs share pooled connections, error answers included
// (walwatch keeps them alive); each watch takes a connection of its own.
func TestHandoffsReuseConnections(t *testing.T) {
	for _, transport := range []string{"unix", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			f := startFake(t, transport, nil)
			f.setHandler(func(w http.ResponseWriter, r *http.Request, rec *recorded) {
				if strings.Contains(r.URL.RawQuery, "snapshot=1%3A") {
					answer(504, status504TooLarge, "Retry-After", "1")(w, r, rec)
					return
				}
				answer(200, rvAnswer("22381936"))(w, r, rec)
			})
			c := f.client(t)
			for i := 0; i < 5; i++ {
				if _, err := c.FreshRV(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := c.HandoffPostgres(context.Background(), walwatch.PostgresSnapshot{Snapshot: "1:1:"}); !apierrors.IsTimeout(err) {
					t.Fatalf("HandoffPostgres: %v, want the 504", err)
				}
			}
			if n := f.conns.Load(); n != 1 {
				t.Errorf("10 requests took %d connections, want 1", n)
			}
		})
	}
}
