package walwatch

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Dialect is the SQL database a list reads.
type Dialect string

const (
	// Postgres is PostgreSQL, walwatch's default source.
	Postgres Dialect = "postgres"
	// MySQL is MySQL or MariaDB (walwatch --source mysql).
	MySQL Dialect = "mysql"
)

// Queryer is what a list reads with inside its snapshot: a *sql.Tx on
// PostgreSQL, a *sql.Conn inside the snapshot's transaction on MySQL and
// MariaDB. It is gorm's ConnPool, so a *gorm.DB can read through it (see the
// walwatchgorm package).
type Queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Snapshot is an open read-only transaction whose reads see exactly the
// transactions that committed at or below its ResourceVersion: a list read
// through it, given that RV, continues exactly into a watch from that RV.
//
// A Snapshot holds one database connection, and on PostgreSQL holds back
// VACUUM, until Close. It may be read by one goroutine at a time, and kept
// across requests (for the pages of one list): it does not end with the
// context BeginSnapshot was given.
type Snapshot struct {
	rv       string
	latest   string
	position string
	dialect  Dialect

	tx   *sql.Tx   // Postgres
	conn *sql.Conn // MySQL

	closeOnce sync.Once
	closeErr  error
}

// ResourceVersion is the RV of the snapshot's content: its last write's.
func (s *Snapshot) ResourceVersion() string { return s.rv }

// LatestResourceVersion is the newest RV at which the table is still the
// snapshot's content: no transaction of the table commits between
// ResourceVersion and it. A list asked to be not older than an RV in that
// range (one a client saw on a bookmark, say), or exactly at one, may be
// answered from this snapshot, with that RV. It is ResourceVersion when
// walwatch names no other (PROTOCOL.md, "Lists from SQL").
func (s *Snapshot) LatestResourceVersion() string { return s.latest }

// Shows is whether the snapshot's content is the table's state at rv:
// ResourceVersion <= rv <= LatestResourceVersion.
func (s *Snapshot) Shows(rv uint64) bool {
	lo, err1 := strconv.ParseUint(s.rv, 10, 64)
	hi, err2 := strconv.ParseUint(s.latest, 10, 64)
	return err1 == nil && err2 == nil && lo <= rv && rv <= hi
}

// Position is the database's name for the snapshot, for logs: the snapshot
// and insert LSN on PostgreSQL, the binlog file, offset and server on MySQL.
func (s *Snapshot) Position() string { return s.position }

// Dialect is the database the snapshot reads.
func (s *Snapshot) Dialect() Dialect { return s.dialect }

// Queryer reads in the snapshot.
func (s *Snapshot) Queryer() Queryer {
	if s.tx != nil {
		return s.tx
	}
	return s.conn
}

// Close ends the snapshot's transaction and gives its connection back to the
// pool. It may be called more than once; later calls return the first's
// result.
func (s *Snapshot) Close() error {
	s.closeOnce.Do(func() {
		// Not the caller's context: a cancelled request must still end the
		// transaction, or the connection would go back to the pool inside it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if s.tx != nil {
			s.closeErr = s.tx.Commit()
			return
		}
		if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
			s.closeErr = err
			// A connection in an unknown state must not be reused: Raw
			// drops a connection whose function returns ErrBadConn.
			_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		if err := s.conn.Close(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// BeginSnapshot opens a read-only snapshot of db and asks walwatch for its
// exact RV, following PROTOCOL.md's rules: a new snapshot after 409 Conflict
// or 410 Expired (up to Config.MaxSnapshots snapshots), the same snapshot
// again after a 504 (walwatch catching up, or its state readers busy, up to
// three times, waiting as its retryAfterSeconds asks). Any other answer,
// and the last 409, 410 or 504, is returned as its *apierrors.StatusError;
// a database error as it is.
//
// On PostgreSQL the transaction is REPEATABLE READ, READ ONLY, and takes
// LOCK TABLE <table> IN ACCESS SHARE MODE before its snapshot, so that no
// table rewrite lies between the snapshot and the reads. On MySQL and
// MariaDB it is START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY, at
// REPEATABLE READ, on a connection of its own; MySQL 8 has no
// binlog_snapshot_* status and is refused (PROTOCOL.md).
//
// ctx bounds the snapshot's setup; the snapshot itself lasts until Close.
func (c *Client) BeginSnapshot(ctx context.Context, db *sql.DB, dialect Dialect) (*Snapshot, error) {
	if dialect != Postgres && dialect != MySQL {
		return nil, fmt.Errorf("walwatch: dialect %q: want %q or %q", dialect, Postgres, MySQL)
	}
	for attempt := 1; ; attempt++ {
		s, handoff, err := c.takeSnapshot(ctx, db, dialect)
		if err != nil {
			return nil, err
		}
		a, err := c.handoffWithRetries(ctx, handoff)
		if err == nil {
			s.rv, s.latest = a.rv, a.latest
			return s, nil
		}
		s.Close()
		if (apierrors.IsConflict(err) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && attempt < c.maxSnapshots {
			continue // this snapshot has no exact RV: take another
		}
		return nil, err
	}
}

// List reads a list in a snapshot and returns its exact RV: it takes a
// snapshot as BeginSnapshot does, runs list inside it once, and ends it.
// list reads with q, never with db (whose other connections see other
// snapshots). An error of list is returned as it is.
func (c *Client) List(ctx context.Context, db *sql.DB, dialect Dialect, list func(ctx context.Context, q Queryer) error) (string, error) {
	s, err := c.BeginSnapshot(ctx, db, dialect)
	if err != nil {
		return "", err
	}
	defer s.Close()
	if err := list(ctx, s.Queryer()); err != nil {
		return "", err
	}
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("walwatch: ending the list's snapshot: %w", err)
	}
	return s.rv, nil
}

// takeSnapshot opens the transaction and reads its position; the returned
// function hands that position off.
func (c *Client) takeSnapshot(ctx context.Context, db *sql.DB, dialect Dialect) (*Snapshot, func(context.Context) (handedOff, error), error) {
	// The transaction outlives ctx (a held snapshot serves later pages), so
	// it is begun without ctx's cancellation; its statements here use ctx.
	txctx := context.WithoutCancel(ctx)
	if dialect == Postgres {
		tx, err := db.BeginTx(txctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return nil, nil, fmt.Errorf("walwatch: beginning the snapshot: %w", err)
		}
		s := &Snapshot{dialect: dialect, tx: tx}
		var p PostgresSnapshot
		// A lock takes no snapshot: the first query after it does.
		if _, err := tx.ExecContext(ctx, "LOCK TABLE "+quotePostgresName(c.table)+" IN ACCESS SHARE MODE"); err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("walwatch: locking %s for the snapshot: %w", c.table, err)
		}
		// On a standby (walwatch decoding there too), the end of what it
		// replayed is where its snapshot stands.
		err = tx.QueryRowContext(ctx, "SELECT pg_current_snapshot()::text, "+
			"(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text").Scan(&p.Snapshot, &p.InsertLSN)
		if err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("walwatch: reading the snapshot: %w", err)
		}
		s.position = "snapshot " + p.Snapshot + " at " + p.InsertLSN
		return s, func(ctx context.Context) (handedOff, error) { return c.handoffPostgres(ctx, p) }, nil
	}

	conn, err := db.Conn(txctx)
	if err != nil {
		return nil, nil, fmt.Errorf("walwatch: a connection for the snapshot: %w", err)
	}
	s := &Snapshot{dialect: dialect, conn: conn}
	fail := func(what string, err error) (*Snapshot, func(context.Context) (handedOff, error), error) {
		s.Close()
		return nil, nil, fmt.Errorf("walwatch: %s: %w", what, err)
	}
	// SET TRANSACTION without SESSION applies to the next transaction only,
	// so the pooled connection keeps its own level afterwards.
	if _, err := conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return fail("setting the snapshot's isolation level", err)
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return fail("starting the snapshot", err)
	}
	var b BinlogSnapshot
	rows, err := conn.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return fail("reading the snapshot's binlog position", err)
	}
	var position string
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return fail("reading the snapshot's binlog position", err)
		}
		switch strings.ToLower(name) {
		case "binlog_snapshot_file":
			b.File = value
		case "binlog_snapshot_position":
			position = value
		}
	}
	if err := rows.Close(); err != nil {
		return fail("reading the snapshot's binlog position", err)
	}
	if err := rows.Err(); err != nil {
		return fail("reading the snapshot's binlog position", err)
	}
	if b.File == "" || position == "" {
		// MySQL has no binlog_snapshot_*; a MariaDB without a binlog shows
		// an empty file.
		return fail("reading the snapshot's binlog position", errors.New(
			"the server shows no binlog_snapshot_file (MySQL has none; MariaDB needs log_bin): walwatch cannot hand off lists on it (PROTOCOL.md, \"The handoff on MySQL/MariaDB\")"))
	}
	if b.Position, err = strconv.ParseUint(position, 10, 64); err != nil {
		return fail("reading the snapshot's binlog position", fmt.Errorf("binlog_snapshot_position %q: %w", position, err))
	}
	var serverID uint64
	if err := conn.QueryRowContext(ctx, "SELECT @@server_id").Scan(&serverID); err != nil {
		return fail("reading the server's id", err)
	}
	if serverID > 0xFFFFFFFF {
		return fail("reading the server's id", fmt.Errorf("@@server_id %d is not 32-bit", serverID))
	}
	b.ServerID = uint32(serverID)
	s.position = fmt.Sprintf("%s:%d on server %d", b.File, b.Position, b.ServerID)
	return s, func(ctx context.Context) (handedOff, error) { return c.handoffBinlog(ctx, b) }, nil
}

// maxHandoffWaits is how often a 504 is asked again with the same snapshot:
// each takes up to --too-large-rv-wait (3 s) in walwatch.
const maxHandoffWaits = 3

func (c *Client) handoffWithRetries(ctx context.Context, handoff func(context.Context) (handedOff, error)) (handedOff, error) {
	for waits := 0; ; waits++ {
		a, err := handoff(ctx)
		if err == nil || waits == maxHandoffWaits || !isGatewayTimeout(err) {
			return a, err
		}
		delay := time.Second
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok && seconds > 0 && seconds <= 10 {
			delay = time.Duration(seconds) * time.Second
		}
		select {
		case <-ctx.Done():
			return handedOff{}, err
		case <-time.After(delay):
		}
	}
}

func isGatewayTimeout(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == 504
}

// quotePostgresName quotes a table name, schema-qualified or not, as an
// identifier: resources -> "resources", public.resources ->
// "public"."resources".
func quotePostgresName(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}
