package walwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
)

// PostgresSnapshot is what a list read in its snapshot on PostgreSQL, for
// the handoff: pg_current_snapshot() and pg_current_wal_insert_lsn() as text
// (on a standby, pg_last_wal_replay_lsn()), read by the first statement of
// the list's REPEATABLE READ transaction.
type PostgresSnapshot struct {
	Snapshot  string // "xmin:xmax:xip,..."
	InsertLSN string // "0/16B3748"; optional
}

// BinlogSnapshot is what a list read in its snapshot on MySQL or MariaDB,
// for the handoff: SHOW STATUS LIKE 'binlog_snapshot_%' after START
// TRANSACTION WITH CONSISTENT SNAPSHOT, and SELECT @@server_id.
type BinlogSnapshot struct {
	File     string // "mariadb-bin.000003"
	Position uint64
	// ServerID is the server the list was read on. Zero leaves it out;
	// after a failover walwatch then refuses a position it cannot place.
	ServerID uint32
}

// HandoffPostgres asks walwatch for the RV from which a watch continues a list read
// in this PostgreSQL snapshot exactly: the list holds exactly the
// transactions that committed at or below it. See HandoffPostgres's errors.
func (c *Client) HandoffPostgres(ctx context.Context, s PostgresSnapshot) (string, error) {
	a, err := c.handoffPostgres(ctx, s)
	return a.rv, err
}

func (c *Client) handoffPostgres(ctx context.Context, s PostgresSnapshot) (handedOff, error) {
	q := url.Values{"snapshot": {s.Snapshot}}
	if s.InsertLSN != "" {
		q.Set("insertLSN", s.InsertLSN)
	}
	return c.resourceVersions(ctx, "/walwatch/v1/handoff", q)
}

// HandoffBinlog is HandoffPostgres for a list read on MySQL or MariaDB.
//
// The answers of both, as errors (*apierrors.StatusError):
//   - 409 Conflict (PostgreSQL): commit order and visibility disagree near
//     the snapshot; list again in a new snapshot;
//   - 410 Expired: the snapshot is older than walwatch retains, or from
//     another server; list again;
//   - 504 with cause ResourceVersionTooLarge: walwatch has not caught up
//     with the snapshot yet; ask again with the same values;
//   - 504 without a cause: walwatch's state readers are all busy; ask again;
//   - 400, 500, 503: a bad request, the database unreadable, walwatch
//     without a state source or shutting down.
//
// BeginSnapshot and List follow these rules themselves.
func (c *Client) HandoffBinlog(ctx context.Context, s BinlogSnapshot) (string, error) {
	a, err := c.handoffBinlog(ctx, s)
	return a.rv, err
}

func (c *Client) handoffBinlog(ctx context.Context, s BinlogSnapshot) (handedOff, error) {
	q := url.Values{
		"binlogFile":     {s.File},
		"binlogPosition": {strconv.FormatUint(s.Position, 10)},
	}
	if s.ServerID != 0 {
		q.Set("serverId", strconv.FormatUint(uint64(s.ServerID), 10))
	}
	return c.resourceVersions(ctx, "/walwatch/v1/handoff", q)
}

// FreshRV answers an RV that every transaction committed before the call
// lies at or below: a watch from it misses nothing committed before, for a
// "most recent" watch without a list. Errors as for HandoffPostgres (504,
// 500, 503).
func (c *Client) FreshRV(ctx context.Context) (string, error) {
	return c.resourceVersion(ctx, "/walwatch/v1/freshrv", nil)
}

// resourceVersionAnswer is the body of a 200 from handoff and freshrv.
type resourceVersionAnswer struct {
	Kind            string `json:"kind"`
	APIVersion      string `json:"apiVersion"`
	ResourceVersion string `json:"resourceVersion"`
	// A handoff's: the newest RV of the same state, when above
	// ResourceVersion (PROTOCOL.md, "Lists from SQL").
	LatestResourceVersion string `json:"latestResourceVersion,omitempty"`
}

// handedOff is a handoff's answer: the state's RV, and the newest RV of the
// same state (rv itself when walwatch names none).
type handedOff struct {
	rv, latest string
}

func (c *Client) resourceVersion(ctx context.Context, path string, query url.Values) (string, error) {
	a, err := c.resourceVersions(ctx, path, query)
	return a.rv, err
}

func (c *Client) resourceVersions(ctx context.Context, path string, query url.Values) (handedOff, error) {
	ctx, cancel := c.withRequestTimeout(ctx)
	defer cancel()
	resp, err := c.get(ctx, path, query)
	if err != nil {
		return handedOff{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return handedOff{}, fmt.Errorf("walwatch: GET %s: reading the answer: %w", path, err)
	}
	var answer resourceVersionAnswer
	if err := json.Unmarshal(body, &answer); err != nil || answer.Kind != "ResourceVersion" {
		return handedOff{}, fmt.Errorf("walwatch: GET %s: not a ResourceVersion: %q", path, body)
	}
	// walwatch spells an RV one way, without leading zeros, and refuses a
	// watch from any other spelling (400).
	rv, err := strconv.ParseUint(answer.ResourceVersion, 10, 64)
	if err != nil || strconv.FormatUint(rv, 10) != answer.ResourceVersion {
		return handedOff{}, fmt.Errorf("walwatch: GET %s: resourceVersion %q is not a decimal uint64 without leading zeros", path, answer.ResourceVersion)
	}
	a := handedOff{rv: answer.ResourceVersion, latest: answer.ResourceVersion}
	if answer.LatestResourceVersion != "" {
		latest, err := strconv.ParseUint(answer.LatestResourceVersion, 10, 64)
		if err != nil || strconv.FormatUint(latest, 10) != answer.LatestResourceVersion || latest < rv {
			return handedOff{}, fmt.Errorf("walwatch: GET %s: latestResourceVersion %q is not a decimal uint64 at or above resourceVersion %s", path, answer.LatestResourceVersion, answer.ResourceVersion)
		}
		a.latest = answer.LatestResourceVersion
	}
	return a, nil
}
