package walwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultEndpoint is where walwatch serves in a Clusterpedia APIServer pod:
// the socket of its --socket default, in the emptyDir both containers mount.
const DefaultEndpoint = "unix:///run/walwatch/walwatch.sock"

// Config says how to reach one walwatch.
type Config struct {
	// Endpoint is walwatch's address:
	//   - "unix:///run/walwatch/walwatch.sock" or "/run/walwatch/walwatch.sock":
	//     its Unix socket (--socket);
	//   - "http://127.0.0.1:8080": its loopback TCP listener (--tcp-listen).
	// Empty means DefaultEndpoint.
	Endpoint string

	// Table is the table that snapshots lock before they read
	// (LOCK TABLE ... IN ACCESS SHARE MODE on PostgreSQL, see PROTOCOL.md):
	// the table walwatch watches. Empty means "resources".
	Table string

	// MaxSnapshots bounds how many snapshots one list may take when walwatch
	// answers that a snapshot cannot be handed off (409 Conflict, 410 Expired).
	// Zero means 5.
	MaxSnapshots int

	// RequestTimeout bounds each request other than a watch (handoff,
	// freshrv) whose context has no deadline of its own. walwatch answers
	// them within --too-large-rv-wait, or 60 s when its state readers are all
	// busy; zero means 90 s.
	RequestTimeout time.Duration

	// Transport, if set, replaces the transport the client builds for
	// Endpoint (for tests and for callers that wrap transports).
	Transport http.RoundTripper
}

// Client talks to one walwatch. It is safe for concurrent use by many
// goroutines; make one per walwatch and keep it for the life of the process,
// since it pools connections for the handoff and freshrv requests. Every
// watch takes a connection of its own (walwatch closes a watch's connection
// when the watch ends).
type Client struct {
	base           *url.URL
	http           *http.Client
	table          string
	maxSnapshots   int
	requestTimeout time.Duration
}

// NewClient checks cfg and returns a Client. It does not connect: walwatch
// may start after the client, and each request dials on its own.
func NewClient(cfg Config) (*Client, error) {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	c := &Client{
		table:          cfg.Table,
		maxSnapshots:   cfg.MaxSnapshots,
		requestTimeout: cfg.RequestTimeout,
	}
	if c.table == "" {
		c.table = "resources"
	}
	if c.maxSnapshots <= 0 {
		c.maxSnapshots = 5
	}
	if c.requestTimeout <= 0 {
		c.requestTimeout = 90 * time.Second
	}

	var socket string
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		socket = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "/"):
		socket = endpoint
	case strings.HasPrefix(endpoint, "http://"):
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, fmt.Errorf("walwatch: endpoint %q: %w", endpoint, err)
		}
		if u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("walwatch: endpoint %q: want http://HOST:PORT, with no path", endpoint)
		}
		u.Path = ""
		c.base = u
	default:
		return nil, fmt.Errorf("walwatch: endpoint %q: want unix:///path/to/walwatch.sock, an absolute socket path, or http://HOST:PORT", endpoint)
	}
	if c.base == nil {
		if socket == "" || !strings.HasPrefix(socket, "/") {
			return nil, fmt.Errorf("walwatch: endpoint %q: the socket path must be absolute", endpoint)
		}
		// The host name is only what the requests carry in Host:; the
		// dialer ignores it.
		c.base = &url.URL{Scheme: "http", Host: "walwatch"}
	}

	transport := cfg.Transport
	if transport == nil {
		t := &http.Transport{
			// Handoffs come in bursts when informers start; keep a few
			// connections for them. Watches close theirs.
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     50 * time.Second, // walwatch closes idle ones at 60 s
			DisableCompression:  true,
		}
		if socket != "" {
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				conn, err := d.DialContext(ctx, "unix", socket)
				if errors.Is(err, syscall.ENOENT) {
					// walwatch removes its socket while it restarts: that is
					// a server not listening, a refused connection, which
					// client-go's reflector answers by watching again from
					// where it was (utilnet.IsConnectionRefused) rather than
					// by listing everything again.
					err = &missingSocketError{socket: socket, err: err}
				}
				return conn, err
			}
		} else {
			t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		transport = t
	}
	c.http = &http.Client{Transport: transport}
	return c, nil
}

// missingSocketError is a dial of a socket file that does not exist: it
// reads as ECONNREFUSED to errors.Is and errors.As, and as what it is to a
// person.
type missingSocketError struct {
	socket string
	err    error
}

func (e *missingSocketError) Error() string {
	return fmt.Sprintf("walwatch is not listening: %s: %v (connection refused)", e.socket, e.err)
}

func (e *missingSocketError) Unwrap() []error { return []error{syscall.ECONNREFUSED, e.err} }

// get sends GET path?query. The caller closes the body of a 200 answer;
// any other answer is returned as an error (see statusError).
func (c *Client) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := *c.base
	u.RawPath = path
	p, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("walwatch: bad path %q: %w", path, err)
	}
	u.Path = p
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("walwatch: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		// Not reached: walwatch is down, or its socket is missing. As
		// client-go does for a connection refused, this is not a Status.
		return nil, fmt.Errorf("walwatch: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError(resp)
	}
	return resp, nil
}

// maxStatusBytes bounds how much of an error answer is read. walwatch's
// Status bodies are a few hundred bytes.
const maxStatusBytes = 1 << 20

// maxUnstructuredMessage is how much of an answer that is not a Status goes
// into its error, as client-go's maxUnstructuredResponseTextBytes.
const maxUnstructuredMessage = 2048

// statusError turns a non-200 answer into the *apierrors.StatusError it
// carries, so that apierrors.IsResourceExpired, IsConflict, IsTimeout and
// IsTooLargeResourceVersion classify it. A body that is not a Status (a proxy
// in between, a truncated answer) becomes the generic error client-go makes
// of such an answer, classified by its HTTP code alone.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	var status metav1.Status
	if err := json.Unmarshal(body, &status); err == nil && status.Kind == "Status" && status.Status != "" {
		if status.Code == 0 {
			status.Code = int32(resp.StatusCode)
		}
		return &apierrors.StatusError{ErrStatus: status}
	}
	retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	message := strings.TrimSpace(string(body))
	if len(message) > maxUnstructuredMessage {
		// As client-go cuts such text: a proxy's error page is not a message.
		message = message[:maxUnstructuredMessage] + " ..."
	}
	if message == "" {
		message = http.StatusText(resp.StatusCode)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, schema.GroupResource{}, "", message, retryAfter, true)
}

// withRequestTimeout gives ctx the client's RequestTimeout unless it has a
// deadline already.
func (c *Client) withRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.requestTimeout)
}
