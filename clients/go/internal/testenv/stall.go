package testenv

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// StallStream makes walwatch lag behind the database: it pauses, in p (the
// proxy walwatch was started through, WalwatchOptions.ViaProxy), the one
// connection that carries walwatch's replication stream (its walsender on
// PostgreSQL, its binlog dump on MariaDB), and no other, so that walwatch's
// handoffs, fresh RVs and initial states still reach the database while its
// stream stays behind. p.Resume lets it catch up.
func (w *Walwatch) StallStream(t testing.TB, db *DB, p *Proxy) {
	t.Helper()
	err := waitFor(time.Minute, func() error {
		ports, err := streamPorts(db, w)
		if err != nil {
			return err
		}
		for _, port := range ports {
			if p.PauseUpstream(port) > 0 {
				return nil
			}
		}
		return errNotYet("no replication connection of walwatch's passes through the proxy yet")
	})
	if err != nil {
		t.Fatalf("testenv: stalling walwatch's stream: %v", err)
	}
}

// streamPorts are the client ports of the replication connections the
// database serves: of w's slot on PostgreSQL, every binlog dump on MariaDB
// (the proxy knows which of them are its own).
func streamPorts(db *DB, w *Walwatch) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ports []int
	if db.Dialect == walwatch.Postgres {
		rows, err := db.SQL.QueryContext(ctx, `SELECT r.client_port FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, w.Slot)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var port int
			if err := rows.Scan(&port); err != nil {
				return nil, err
			}
			ports = append(ports, port)
		}
		return ports, rows.Err()
	}
	rows, err := db.SQL.QueryContext(ctx, `SELECT HOST FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var host string
		if err := rows.Scan(&host); err != nil {
			return nil, err
		}
		if _, port, err := net.SplitHostPort(host); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				ports = append(ports, n)
			}
		}
	}
	return ports, rows.Err()
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }
