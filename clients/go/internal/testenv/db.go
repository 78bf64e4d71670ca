package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, as gorm's postgres driver uses
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// DB is a database of one test's own, with Clusterpedia's `resources` table
// (schema/clusterpedia.sql on PostgreSQL, schema/mysql/clusterpedia.sql on
// MariaDB). It is dropped at t.Cleanup, after the walwatches started on it
// have stopped (cleanups run last-registered first); on PostgreSQL its
// walsenders are terminated and its replication slots dropped first. With
// WALWATCH_TEST_KEEP_LOGS=1 it is kept, and its name logged.
//
// The fields are set once and may be read from any goroutine; SQL is safe
// for concurrent use.
type DB struct {
	// Dialect is walwatch.Postgres or walwatch.MySQL (MariaDB).
	Dialect walwatch.Dialect
	// Name is the database's name, derived from t.Name(): lower case, [a-z0-9_],
	// unique among every test of every process sharing the server, at most
	// 63 bytes. On PostgreSQL the first walwatch's slot has this name too.
	Name string
	// SQL is a superuser's connection pool on the database: pgx's database/sql
	// driver ("pgx") over the Unix socket on PostgreSQL; go-sql-driver/mysql
	// ("mysql") as root over the Unix socket on MariaDB, with parseTime=true,
	// loc=UTC, time_zone '+00:00', multiStatements off and server-side
	// prepared statements (no interpolateParams), as gorm's mysql driver uses
	// it by default.
	SQL *sql.DB
	// DSN is what SQL was opened with, for gorm's drivers
	// (postgres.Open(DSN), mysql.Open(DSN)).
	DSN string

	srv     serverAddr
	private bool         // on a Server of the test's own: the server's cleanup removes everything
	started atomic.Int32 // walwatches started on this database, for their slots and server ids
}

// serverAddr is where a server listens and how walwatch logs in.
type serverAddr struct {
	dialect   walwatch.Dialect
	socketDir string // PostgreSQL: the Unix socket's directory
	socket    string // MariaDB: the Unix socket
	port      int    // on 127.0.0.1; on PostgreSQL also the socket's number
	// MariaDB: the account walwatch connects with over TCP (REPLICATION
	// SLAVE, REPLICATION CLIENT, SELECT), as a deployment would.
	pwUser, pwPassword string
}

// Addr is the server's TCP address, "127.0.0.1:PORT": a Proxy's target.
// Both servers listen there, as on their Unix socket.
func (db *DB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(db.srv.port)) }

// NewPostgres creates a database on the shared PostgreSQL server
// (WALWATCH_TEST_PGHOST, WALWATCH_TEST_PGPORT) and applies
// schema/clusterpedia.sql to it. It fails t if the server is not set or
// not reachable.
func NewPostgres(t testing.TB) *DB {
	t.Helper()
	host, port := os.Getenv("WALWATCH_TEST_PGHOST"), os.Getenv("WALWATCH_TEST_PGPORT")
	if host == "" || port == "" {
		t.Fatalf("testenv: WALWATCH_TEST_PGHOST and WALWATCH_TEST_PGPORT are not set: these tests need a PostgreSQL 15 with wal2json; %s (or export what `tests/tools/pg-sandbox.sh start DIR` prints)", howToRun)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("testenv: WALWATCH_TEST_PGPORT=%q is not a port; %s", port, howToRun)
	}
	return newPostgresDB(t, serverAddr{dialect: walwatch.Postgres, socketDir: host, port: p}, false)
}

// NewMariaDB creates a database on the shared MariaDB server (the sandbox
// in WALWATCH_TEST_MYDIR) and applies schema/mysql/clusterpedia.sql to it.
// It fails t if the server is not set or not running.
func NewMariaDB(t testing.TB) *DB {
	t.Helper()
	dir := os.Getenv("WALWATCH_TEST_MYDIR")
	if dir == "" {
		t.Fatalf("testenv: WALWATCH_TEST_MYDIR is not set: these tests need a MariaDB sandbox (tests/tools/mariadb-sandbox.sh); %s", howToRun)
	}
	srv, err := sharedMariaDB(dir)
	if err != nil {
		t.Fatalf("testenv: the MariaDB sandbox of WALWATCH_TEST_MYDIR: %v; %s", err, howToRun)
	}
	return newMariaDB(t, srv, false)
}

// sharedMariaDB asks the sandbox script once per process, since it also
// checks that the server runs.
var sharedMariaDB = func() func(dir string) (serverAddr, error) {
	var mu sync.Mutex
	known := map[string]serverAddr{}
	return func(dir string) (serverAddr, error) {
		mu.Lock()
		defer mu.Unlock()
		if srv, ok := known[dir]; ok {
			return srv, nil
		}
		src, err := sourceDir()
		if err != nil {
			return serverAddr{}, err
		}
		out, err := runTool(30*time.Second, nil, filepath.Join(src, "tests/tools/mariadb-sandbox.sh"), "env", dir)
		if err != nil {
			return serverAddr{}, err
		}
		srv, err := mariaDBFromExports(parseExports(out))
		if err != nil {
			return serverAddr{}, err
		}
		known[dir] = srv
		return srv, nil
	}
}()

func mariaDBFromExports(vars map[string]string) (serverAddr, error) {
	port, err := portOf(vars, "WALWATCH_TEST_MYPORT")
	if err != nil {
		return serverAddr{}, err
	}
	srv := serverAddr{
		dialect:    walwatch.MySQL,
		socket:     vars["WALWATCH_TEST_MYSOCKET"],
		port:       port,
		pwUser:     vars["WALWATCH_TEST_MY_PW_USER"],
		pwPassword: vars["WALWATCH_TEST_MY_PW_PASSWORD"],
	}
	if srv.socket == "" || srv.pwUser == "" {
		return serverAddr{}, fmt.Errorf("the sandbox printed no WALWATCH_TEST_MYSOCKET or WALWATCH_TEST_MY_PW_USER")
	}
	return srv, nil
}

func postgresDSN(srv serverAddr, dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable application_name=testenv", srv.socketDir, srv.port, dbname)
}

func mariaDBDSN(srv serverAddr, dbname string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = srv.socket
	cfg.DBName = dbname
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Times are sent as UTC; NOW() and the like then agree with them.
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg.FormatDSN()
}

func newPostgresDB(t testing.TB, srv serverAddr, private bool) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverBound)
	defer cancel()
	schemaPath := filepath.Join(SourceDir(t), "schema", "clusterpedia.sql")
	ddl, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatalf("testenv: reading the schema: %v", err)
	}
	admin, err := sql.Open("pgx", postgresDSN(srv, "postgres"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer admin.Close()
	db := &DB{Dialect: walwatch.Postgres, Name: uniqueName("go", t.Name()), srv: srv, private: private}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+db.Name+`"`); err != nil {
		t.Fatalf("testenv: creating database %s on the PostgreSQL at %s port %d: %v; %s", db.Name, srv.socketDir, srv.port, err, howToRun)
	}
	db.DSN = postgresDSN(srv, db.Name)
	if db.SQL, err = sql.Open("pgx", db.DSN); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { db.dropPostgres(t) })
	// One Exec without arguments is one simple-protocol query, which may
	// hold several statements.
	if _, err := db.SQL.ExecContext(ctx, string(ddl)); err != nil {
		t.Fatalf("testenv: applying %s to %s: %v", schemaPath, db.Name, err)
	}
	return db
}

func (db *DB) dropPostgres(t testing.TB) {
	db.SQL.Close()
	if db.private {
		return // the server's directory goes, with the database in it
	}
	if keepLogs() {
		t.Logf("testenv: WALWATCH_TEST_KEEP_LOGS=1: database %s kept", db.Name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("pgx", postgresDSN(db.srv, "postgres"))
	if err != nil {
		t.Errorf("testenv: dropping %s: %v", db.Name, err)
		return
	}
	defer admin.Close()
	// A walsender that is still exiting keeps its slot active, and an
	// active slot cannot be dropped: terminate, drop and count again until
	// none is left.
	err = waitFor(20*time.Second, func() error {
		if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", db.Name); err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", db.Name); err != nil {
			return err
		}
		var left int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = $1", db.Name).Scan(&left); err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%d replication slot(s) still active", left)
		}
		return nil
	})
	if err != nil {
		t.Errorf("testenv: dropping the replication slots of %s: %v", db.Name, err)
		return
	}
	if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+db.Name+`" WITH (FORCE)`); err != nil {
		t.Errorf("testenv: dropping database %s: %v", db.Name, err)
	}
}

func newMariaDB(t testing.TB, srv serverAddr, private bool) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverBound)
	defer cancel()
	schemaPath := filepath.Join(SourceDir(t), "schema", "mysql", "clusterpedia.sql")
	ddl, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatalf("testenv: reading the schema: %v", err)
	}
	admin, err := sql.Open("mysql", mariaDBDSN(srv, ""))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer admin.Close()
	db := &DB{Dialect: walwatch.MySQL, Name: uniqueName("go", t.Name()), srv: srv, private: private}
	// utf8mb4 as a MySQL 8 database is by default, whatever the server's
	// default (the schema's header says why).
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+db.Name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("testenv: creating database %s on the MariaDB at %s: %v; %s", db.Name, srv.socket, err, howToRun)
	}
	db.DSN = mariaDBDSN(srv, db.Name)
	if db.SQL, err = sql.Open("mysql", db.DSN); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { db.dropMariaDB(t) })
	for _, statement := range splitStatements(string(ddl)) {
		if _, err := db.SQL.ExecContext(ctx, statement); err != nil {
			t.Fatalf("testenv: applying %s to %s: %v", schemaPath, db.Name, err)
		}
	}
	return db
}

func (db *DB) dropMariaDB(t testing.TB) {
	db.SQL.Close()
	if db.private {
		return
	}
	if keepLogs() {
		t.Logf("testenv: WALWATCH_TEST_KEEP_LOGS=1: database %s kept", db.Name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", mariaDBDSN(db.srv, ""))
	if err != nil {
		t.Errorf("testenv: dropping %s: %v", db.Name, err)
		return
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db.Name+"`"); err != nil {
		t.Errorf("testenv: dropping database %s: %v", db.Name, err)
	}
}

// splitStatements splits a script at the ';' that end lines, dropping the
// pieces that hold only comments, since the MySQL connection runs one
// statement at a time (multiStatements off, as gorm's driver has it).
func splitStatements(script string) []string {
	var out []string
	var current strings.Builder
	content := false
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		current.WriteString(line)
		current.WriteByte('\n')
		if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
			content = true
		}
		if strings.HasSuffix(trimmed, ";") {
			if content {
				s := strings.TrimSpace(current.String())
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			current.Reset()
			content = false
		}
	}
	if content {
		out = append(out, strings.TrimSpace(current.String()))
	}
	return out
}

// Row is one row of `resources`, as far as comparing a watch's objects
// with the table needs it.
type Row struct {
	Cluster, Namespace, Name, UID string
	// Object is the `object` column as text: on PostgreSQL jsonb's
	// normalized text (keys reordered, ", " and ": " spacing), on MariaDB
	// the text as written. Compare it as JSON, not as bytes.
	Object []byte
}

// String shows the row with its object as text.
func (r Row) String() string {
	return fmt.Sprintf("%s/%s/%s uid=%s %s", r.Cluster, r.Namespace, r.Name, r.UID, r.Object)
}

// SelectRows reads every row of gvr in one query (one snapshot), of one
// cluster and one namespace, or of all where cluster or namespace is "",
// sorted by cluster, namespace and name (byte-wise).
func SelectRows(ctx context.Context, db *DB, gvr schema.GroupVersionResource, cluster, namespace string) ([]Row, error) {
	q := func(name string) string { return `"` + name + `"` }
	object := `"object"::text`
	placeholder := func(n int) string { return "$" + strconv.Itoa(n) }
	if db.Dialect == walwatch.MySQL {
		q = func(name string) string { return "`" + name + "`" }
		object = "`object`"
		placeholder = func(int) string { return "?" }
	}
	query := "SELECT " + q("cluster") + ", " + q("namespace") + ", " + q("name") + ", " + q("uid") + ", " + object +
		" FROM " + q("resources") + " WHERE " + q("group") + " = " + placeholder(1) +
		" AND " + q("version") + " = " + placeholder(2) + " AND " + q("resource") + " = " + placeholder(3)
	args := []any{gvr.Group, gvr.Version, gvr.Resource}
	if cluster != "" {
		args = append(args, cluster)
		query += " AND " + q("cluster") + " = " + placeholder(len(args))
	}
	if namespace != "" {
		args = append(args, namespace)
		query += " AND " + q("namespace") + " = " + placeholder(len(args))
	}
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("testenv: selecting %s: %w", gvr, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.Cluster, &r.Namespace, &r.Name, &r.UID, &r.Object); err != nil {
			return nil, fmt.Errorf("testenv: selecting %s: %w", gvr, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("testenv: selecting %s: %w", gvr, err)
	}
	// Sorted here, byte-wise: MariaDB's collation is case-insensitive,
	// PostgreSQL's (C) is not, and the order must not depend on the dialect.
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}
