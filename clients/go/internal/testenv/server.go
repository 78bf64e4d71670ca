package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// Server is a database server of one test's own, for what the shared one
// must not see: restarts, crashes, stops. It runs in a sandbox directory
// under /tmp (tests/tools/pg-sandbox.sh or mariadb-sandbox.sh), listening
// on a Unix socket in it and on 127.0.0.1 on a free port, and keeps both,
// and its data, across Restart, Kill and Start, so that walwatch and the
// DB's pool reconnect to the same addresses. At t.Cleanup it is stopped and
// its directory removed; if the test failed, the tail of its log is logged
// first.
//
// When the test runs as root, the server runs as the sandbox's user
// (postgres, mysql), as the sandbox scripts arrange.
//
// A Server's methods are for the test's goroutine, one at a time.
type Server struct {
	// Dialect is walwatch.Postgres or walwatch.MySQL (MariaDB).
	Dialect walwatch.Dialect
	// Dir is the sandbox directory: the data, the server's log under log/,
	// the Unix socket.
	Dir string

	srv serverAddr
	// MariaDB: the server this Server started (Start), reaped by a
	// goroutine; nil while the sandbox script's own server runs.
	mariadbd *exec.Cmd
	exited   chan struct{}
}

// NewPrivatePostgres starts a PostgreSQL 15 of the test's own with
// tests/tools/pg-sandbox.sh (the shared server's settings) and creates a
// database on it, as NewPostgres does on the shared one.
func NewPrivatePostgres(t testing.TB) (*DB, *Server) {
	t.Helper()
	s := startSandbox(t, walwatch.Postgres, "pg-sandbox.sh", "ww-gopg.")
	vars := s.sandboxExports(t)
	port, err := portOf(vars, "WALWATCH_TEST_PGPORT")
	if err != nil {
		t.Fatalf("testenv: pg-sandbox.sh start %s: %v", s.Dir, err)
	}
	s.srv = serverAddr{dialect: walwatch.Postgres, socketDir: s.Dir, port: port}
	return newPostgresDB(t, s.srv, true), s
}

// NewPrivateMariaDB starts a MariaDB of the test's own with
// tests/tools/mariadb-sandbox.sh (the shared server's settings: row-based
// binary log, server_id 1, the walwatch_pw account) and creates a database
// on it, as NewMariaDB does on the shared one.
func NewPrivateMariaDB(t testing.TB) (*DB, *Server) {
	t.Helper()
	s := startSandbox(t, walwatch.MySQL, "mariadb-sandbox.sh", "ww-gomy.")
	srv, err := mariaDBFromExports(s.sandboxExports(t))
	if err != nil {
		t.Fatalf("testenv: mariadb-sandbox.sh start %s: %v", s.Dir, err)
	}
	s.srv = srv
	return newMariaDB(t, s.srv, true), s
}

// startSandbox runs `SCRIPT start DIR` in a new directory under /tmp (short:
// the socket's path must fit in 107 bytes, and every parent must be
// traversable by the server's user) and registers its stop.
func startSandbox(t testing.TB, dialect walwatch.Dialect, script, prefix string) *Server {
	t.Helper()
	path := filepath.Join(SourceDir(t), "tests", "tools", script)
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	s := &Server{Dialect: dialect, Dir: dir}
	if _, err := runTool(3*time.Minute, nil, path, "start", dir); err != nil {
		_, _ = runTool(time.Minute, nil, path, "stop", dir)
		t.Fatalf("testenv: starting a private server: %v; %s", err, howToRun)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: the private server's log (%s):\n%s", s.logPath(), fileTail(s.logPath(), 8000))
		}
		if s.Dialect == walwatch.MySQL {
			// A stopped (SIGSTOP) server must run again to shut down.
			if pid, err := s.pid(); err == nil {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		if _, err := runTool(2*time.Minute, nil, path, "stop", dir); err != nil {
			t.Errorf("testenv: stopping the private server: %v", err)
		}
		if s.exited != nil {
			<-s.exited
		}
	})
	return s
}

func (s *Server) sandboxExports(t testing.TB) map[string]string {
	t.Helper()
	script := "pg-sandbox.sh"
	if s.Dialect == walwatch.MySQL {
		script = "mariadb-sandbox.sh"
	}
	out, err := runTool(30*time.Second, nil, filepath.Join(SourceDir(t), "tests", "tools", script), "env", s.Dir)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return parseExports(out)
}

func (s *Server) logPath() string {
	if s.Dialect == walwatch.Postgres {
		return filepath.Join(s.Dir, "log", "postgresql.log")
	}
	return filepath.Join(s.Dir, "log", "mariadbd.log")
}

// Pid is the server's main process (postmaster, mariadbd), for a test that
// signals it itself (SIGSTOP: a silent server). It fails t if the server
// does not run.
func (s *Server) Pid(t testing.TB) int {
	t.Helper()
	pid, err := s.pid()
	if err != nil || processGone(pid) {
		t.Fatalf("testenv: the private server in %s does not run", s.Dir)
	}
	return pid
}

func (s *Server) pid() (int, error) {
	file := filepath.Join(s.Dir, "mariadbd.pid")
	if s.Dialect == walwatch.Postgres {
		file = filepath.Join(s.Dir, "data", "postmaster.pid")
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(text), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// Restart stops the server cleanly (pg_ctl -m fast: sessions ended, a
// checkpoint written, walsenders first send what they have; MariaDB:
// SHUTDOWN) and starts it again on the same port, socket and data. It
// returns once the server accepts connections; walwatch and the DB's pool
// reconnect by themselves.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.Dialect == walwatch.Postgres {
		s.pgCtl(t, "restart", "-m", "fast", "-l", s.logPath())
	} else {
		s.stopMariaDB(t)
		s.startMariaDB(t)
	}
	s.waitAccepting(t)
}

// Kill stops the server at once, as a crash does: pg_ctl -m immediate
// (every server process killed, no checkpoint: the next start recovers from
// the WAL), SIGKILL to mariadbd. It returns once the server is gone, and
// starts nothing: Start does.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.Dialect == walwatch.Postgres {
		s.pgCtl(t, "stop", "-m", "immediate")
		return
	}
	pid, err := s.pid()
	if err != nil || processGone(pid) {
		t.Fatalf("testenv: Kill: the private MariaDB in %s does not run", s.Dir)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("testenv: kill -KILL %d: %v", pid, err)
	}
	if err := waitFor(serverBound, func() error {
		if !processGone(pid) {
			return fmt.Errorf("mariadbd %d still runs", pid)
		}
		return nil
	}); err != nil {
		t.Fatalf("testenv: Kill: %v", err)
	}
}

// Start starts the server again after Kill, on the same port, socket and
// data, and returns once it accepts connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.Dialect == walwatch.Postgres {
		s.pgCtl(t, "start", "-l", s.logPath())
	} else {
		s.startMariaDB(t)
	}
	s.waitAccepting(t)
}

// pgCtl runs pg_ctl on the server's data directory, as the sandbox's user
// (postgres) when the test runs as root: PostgreSQL refuses to run as root.
// -w -t 60: it waits for the start or stop to finish.
func (s *Server) pgCtl(t testing.TB, args ...string) {
	t.Helper()
	bindir := os.Getenv("WALWATCH_PG_BINDIR") // as pg-sandbox.sh reads it
	if bindir == "" {
		bindir = "/usr/lib/postgresql/15/bin"
	}
	argv := append([]string{filepath.Join(bindir, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-w", "-t", "60"}, args...)
	if os.Geteuid() == 0 {
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	if _, err := runTool(2*time.Minute, nil, argv...); err != nil {
		t.Fatalf("testenv: %v\nserver log:\n%s", err, fileTail(s.logPath(), 4000))
	}
}

// stopMariaDB shuts the server down as mariadb-admin shutdown does, and
// waits until its process is gone.
func (s *Server) stopMariaDB(t testing.TB) {
	t.Helper()
	pid, err := s.pid()
	if err != nil || processGone(pid) {
		t.Fatalf("testenv: Restart: the private MariaDB in %s does not run", s.Dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root, err := sql.Open("mysql", mariaDBDSN(s.srv, ""))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer root.Close()
	// The server may close the connection before it answers: the error
	// counts only if the server does not go.
	_, shutdownErr := root.ExecContext(ctx, "SHUTDOWN")
	if err := waitFor(serverBound, func() error {
		if !processGone(pid) {
			return fmt.Errorf("mariadbd %d still runs after SHUTDOWN (%v)", pid, shutdownErr)
		}
		return nil
	}); err != nil {
		t.Fatalf("testenv: Restart: %v", err)
	}
}

// startMariaDB starts mariadbd as mariadb-sandbox.sh does: in a session of
// its own, on the sandbox's my.cnf, as the mysql user when root (mariadbd
// refuses root), its output appended to its log. It is this process's
// child, so that a goroutine reaps it when it ends (no zombie that would
// look alive), and it outlives the test binary as the script's does.
func (s *Server) startMariaDB(t testing.TB) {
	t.Helper()
	if s.exited != nil {
		<-s.exited // the previous one is gone (Kill, Restart waited for that)
	}
	mariadbd := os.Getenv("WALWATCH_MARIADBD") // as mariadb-sandbox.sh reads it
	if mariadbd == "" {
		mariadbd = "/usr/sbin/mariadbd"
	}
	argv := []string{mariadbd, "--defaults-file=" + filepath.Join(s.Dir, "my.cnf")}
	if os.Geteuid() == 0 {
		// setpriv execs the server, so the server is the child we reap.
		argv = append([]string{"setpriv", "--reuid=mysql", "--regid=mysql", "--init-groups", "--"}, argv...)
	}
	// A SIGKILLed server leaves its pid file; the sandbox's start removes it
	// too, so that no stale pid names the server.
	_ = os.Remove(filepath.Join(s.Dir, "mariadbd.pid"))
	logFile, err := os.OpenFile(s.logPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: starting %s: %v", strings.Join(argv, " "), err)
	}
	s.mariadbd = cmd
	s.exited = make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(s.exited)
}

// waitAccepting waits until the server answers a connection and a ping.
func (s *Server) waitAccepting(t testing.TB) {
	t.Helper()
	driver, dsn := "pgx", postgresDSN(s.srv, "postgres")+" connect_timeout=5"
	if s.Dialect == walwatch.MySQL {
		driver, dsn = "mysql", mariaDBDSN(s.srv, "")
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer db.Close()
	exited := s.exited
	err = waitFor(serverBound, func() error {
		if exited != nil {
			select {
			case <-exited:
				return permanent(fmt.Errorf("the server exited"))
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
	if err != nil {
		t.Fatalf("testenv: the private server in %s does not accept connections: %v\nserver log:\n%s", s.Dir, err, fileTail(s.logPath(), 4000))
	}
}
