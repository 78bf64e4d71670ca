package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// WalwatchOptions are what a test changes in the walwatch StartWalwatch
// runs.
type WalwatchOptions struct {
	// MaxLogBytes is --max-log-bytes (the event log's budget), e.g. "1Mi".
	// Empty: walwatch's default.
	MaxLogBytes string
	// TCP also serves the watch API on a free loopback port
	// (--tcp-listen 127.0.0.1:PORT), whose address is Walwatch.TCPEndpoint.
	TCP bool
	// ViaProxy, if set, makes walwatch reach the database through this
	// proxy (see NewProxy), over TCP: every connection walwatch opens
	// (replication, state readers, handoffs) passes through it, so that
	// Pause stalls walwatch and CutAll cuts it off. The proxy's target must
	// be the database's server (db.Addr()).
	ViaProxy *Proxy
	// Args are more flags, appended last. A flag StartWalwatch sets by
	// default (--conninfo, --slot, --source, --mysql-conninfo,
	// --server-id-from, --replay-window, --metrics-address, --log-level,
	// --max-log-bytes) is left out when Args names it, so Args may replace
	// it; --socket and --tcp-listen cannot be replaced.
	Args []string
	// Env is more environment, "NAME=value". walwatch gets the test's
	// environment without WALWATCH_* and PG* variables (every flag has a
	// WALWATCH_ variable, and libpq reads PG*), so that only its flags
	// configure it; Env adds to that.
	Env []string
}

// Walwatch is a walwatch process of one test's, serving on a Unix socket of
// its own. It is stopped at t.Cleanup (SIGTERM, SIGKILL after 10 s); if
// the test failed, how it ended and the tail of its stderr are logged.
//
// The process is in a process group of its own and gets SIGKILL when the
// test binary dies (Pdeathsig), so that no walwatch outlives a crashed or
// killed test run.
//
// Its methods are for the test's goroutine; Stderr, Running and Pid may be
// called from any.
type Walwatch struct {
	// Endpoint is walwatch's Unix socket, "unix:///tmp/.../walwatch.sock".
	Endpoint string
	// TCPEndpoint is "http://127.0.0.1:PORT" with WalwatchOptions.TCP, else "".
	TCPEndpoint string
	// Client is a walwatch client on Endpoint.
	Client *walwatch.Client
	// Slot is the replication slot on PostgreSQL: the database's name for
	// the first walwatch started on a DB, that name and a number for the
	// next (so that two walwatches on one database do not share a slot).
	// "" on MariaDB.
	Slot string
	// ServerIDFrom is --server-id-from on MariaDB, unique per walwatch of a
	// test, so that two do not share a server id. "" on PostgreSQL.
	ServerIDFrom string

	socket     string
	argv       []string
	env        []string
	stderrPath string

	mu  sync.Mutex
	run *walwatchRun // the current or last process
}

// walwatchRun is one process of a Walwatch, from one start to its exit.
type walwatchRun struct {
	cmd        *exec.Cmd
	done       chan struct{}    // closed once it exited and was reaped
	state      *os.ProcessState // set before done closes
	stderrFrom int64            // where its output starts in the stderr file
}

// StartWalwatch starts walwatch (Binary) on db and waits until GET /readyz
// on its socket answers 200 (at most 60 s; on failure it fails t with
// walwatch's stderr).
//
// PostgreSQL: --conninfo to db over the server's Unix socket as postgres
// (over TCP to the proxy with ViaProxy), --slot Slot. MariaDB: --source
// mysql, --mysql-conninfo with the walwatch_pw account over 127.0.0.1
// (or the proxy), --server-id-from ServerIDFrom, --replay-window 0s (unless
// Args sets one: a window would hold history the test did not write).
// Both: --socket in a new directory under /tmp (a socket path must fit in
// 107 bytes), --metrics-address "" (tests run in parallel, and a fixed port
// would collide), --log-level debug, stderr (and stdout) appended to a file
// in t.TempDir().
func StartWalwatch(t testing.TB, db *DB, opts WalwatchOptions) *Walwatch {
	t.Helper()
	bin := Binary(t)
	n := int(db.started.Add(1))
	dir, err := os.MkdirTemp("/tmp", "ww-gosock.")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &Walwatch{
		socket:     filepath.Join(dir, "walwatch.sock"),
		stderrPath: filepath.Join(t.TempDir(), fmt.Sprintf("walwatch%d.stderr", n)),
		env:        append(walwatchEnviron(), opts.Env...),
	}
	w.Endpoint = "unix://" + w.socket
	if w.Client, err = walwatch.NewClient(walwatch.Config{Endpoint: w.Endpoint}); err != nil {
		t.Fatalf("testenv: %v", err)
	}

	host, port := "", db.srv.port
	if opts.ViaProxy != nil {
		host, port = "127.0.0.1", opts.ViaProxy.port()
	}
	var defaults [][]string // flag and value; Args may replace each
	if db.Dialect == walwatch.Postgres {
		if host == "" {
			host = db.srv.socketDir
		}
		w.Slot = db.Name
		if n > 1 {
			w.Slot = fitName(fmt.Sprintf("%s_%d", db.Name, n), 63)
		}
		defaults = append(defaults,
			[]string{"--conninfo", fmt.Sprintf("host=%s port=%d dbname=%s user=postgres", host, port, db.Name)},
			[]string{"--slot", w.Slot})
	} else {
		if host == "" {
			host = "127.0.0.1"
		}
		// walwatch takes at most 60 bytes; the name's unique part (the
		// process and the test's number) is at its front.
		w.ServerIDFrom = fmt.Sprintf("ww-%d-%s", n, db.Name)
		if len(w.ServerIDFrom) > 60 {
			w.ServerIDFrom = w.ServerIDFrom[:60]
		}
		defaults = append(defaults,
			[]string{"--source", "mysql"},
			[]string{"--mysql-conninfo", fmt.Sprintf("host=%s port=%d user=%s password=%s database=%s",
				host, port, db.srv.pwUser, db.srv.pwPassword, db.Name)},
			[]string{"--server-id-from", w.ServerIDFrom},
			[]string{"--replay-window", "0s"})
	}
	defaults = append(defaults,
		[]string{"--metrics-address="},
		[]string{"--log-level", "debug"})
	if opts.MaxLogBytes != "" {
		defaults = append(defaults, []string{"--max-log-bytes", opts.MaxLogBytes})
	}

	w.argv = []string{bin, "--socket", w.socket}
	for _, d := range defaults {
		if !namesFlag(opts.Args, strings.TrimSuffix(d[0], "=")) {
			w.argv = append(w.argv, d...)
		}
	}
	if opts.TCP {
		tcpPort, err := freePort()
		if err != nil {
			t.Fatalf("testenv: a free port for --tcp-listen: %v", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort))
		w.argv = append(w.argv, "--tcp-listen", addr)
		w.TCPEndpoint = "http://" + addr
	}
	w.argv = append(w.argv, opts.Args...)

	t.Cleanup(func() { w.stop(t) })
	w.start(t)
	return w
}

// namesFlag is whether args hold flag, as "--flag" or "--flag=value".
func namesFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

func walwatchEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WALWATCH_") || strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freePort is a loopback port nobody listens on now. Another process may
// take it before walwatch does; on loopback in a test run that is rare.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// spawns carries process starts to the one goroutine that makes them.
var spawns = make(chan func())

var startSpawner = sync.OnceFunc(func() {
	go func() {
		// Pdeathsig fires when the thread that forked the child ends, not
		// the process, and Go ends a thread when a goroutine locked to it
		// exits; a thread that once ran a test goroutine may end so. This
		// goroutine stays locked to its thread, and never exits, so that
		// thread lives as long as the process.
		runtime.LockOSThread()
		for spawn := range spawns {
			spawn()
		}
	}()
})

// startFromLockedThread is cmd.Start on the spawner's thread.
func startFromLockedThread(cmd *exec.Cmd) error {
	startSpawner()
	result := make(chan error, 1)
	spawns <- func() { result <- cmd.Start() }
	return <-result
}

// start launches a process with the Walwatch's flags and waits until it is
// ready.
func (w *Walwatch) start(t testing.TB) {
	t.Helper()
	out, err := os.OpenFile(w.stderrPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	info, err := out.Stat()
	if err != nil {
		out.Close()
		t.Fatalf("testenv: %v", err)
	}
	cmd := exec.Command(w.argv[0], w.argv[1:]...)
	cmd.Env = w.env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = startFromLockedThread(cmd)
	out.Close()
	if err != nil {
		t.Fatalf("testenv: starting walwatch: %v", err)
	}
	run := &walwatchRun{cmd: cmd, done: make(chan struct{}), stderrFrom: info.Size()}
	go func() {
		_ = cmd.Wait()
		run.state = cmd.ProcessState
		close(run.done)
	}()
	w.mu.Lock()
	w.run = run
	w.mu.Unlock()
	w.waitReady(t, run)
}

// WaitReady waits until GET /readyz answers 200 (at most 60 s, else it
// fails t with walwatch's stderr): streaming, and within --ready-max-lag of
// the server. For a test whose database restarted, or that paused walwatch's
// connection: walwatch reconnects and catches up by itself.
func (w *Walwatch) WaitReady(t testing.TB) {
	t.Helper()
	w.waitReady(t, w.current())
}

func (w *Walwatch) waitReady(t testing.TB, run *walwatchRun) {
	t.Helper()
	client := &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", w.socket)
			},
			DisableKeepAlives: true,
		},
		Timeout: 5 * time.Second,
	}
	defer client.CloseIdleConnections()
	err := waitFor(readyBound, func() error {
		select {
		case <-run.done:
			return permanent(fmt.Errorf("walwatch exited before it was ready (%v)", run.state))
		default:
		}
		resp, err := client.Get("http://walwatch/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /readyz: %d %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: walwatch is not ready: %v\n%s", err, w.stderrTail())
	}
}

func (w *Walwatch) current() *walwatchRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.run
}

// Running is whether the current process has not exited.
func (w *Walwatch) Running() bool {
	run := w.current()
	if run == nil {
		return false
	}
	select {
	case <-run.done:
		return false
	default:
		return true
	}
}

// Pid is the current (or last) process's id.
func (w *Walwatch) Pid() int { return w.current().cmd.Process.Pid }

// Restart stops walwatch with SIGTERM, waits until it exited (at most 30 s,
// else it fails t), and starts it again with the same flags, socket and
// slot or server id, and waits until it is ready.
func (w *Walwatch) Restart(t testing.TB) {
	t.Helper()
	run := w.current()
	_ = syscall.Kill(-run.cmd.Process.Pid, syscall.SIGCONT) // a stopped walwatch cannot exit
	_ = syscall.Kill(-run.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-run.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("testenv: walwatch did not exit within 30 s of SIGTERM\n%s", w.stderrTail())
	}
	w.start(t)
}

// RestartWith restarts walwatch as Restart does, with its flags changed:
// each flag that args name ("--flag value" or "--flag=value") replaces
// that flag's earlier value; the others are added. The flags hold for the
// later restarts and starts too.
func (w *Walwatch) RestartWith(t testing.TB, args ...string) {
	t.Helper()
	var argv []string
	for i := 0; i < len(w.argv); i++ {
		a := w.argv[i]
		name, _, inline := strings.Cut(a, "=")
		if i > 0 && strings.HasPrefix(a, "--") && namesFlag(args, name) {
			if !inline && i+1 < len(w.argv) && !strings.HasPrefix(w.argv[i+1], "--") {
				i++ // its value
			}
			continue
		}
		argv = append(argv, a)
	}
	w.argv = append(argv, args...)
	w.Restart(t)
}

// Kill sends SIGKILL to walwatch and waits until it is gone. Start starts
// it again.
func (w *Walwatch) Kill(t testing.TB) {
	t.Helper()
	run := w.current()
	_ = syscall.Kill(-run.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-run.done:
	case <-time.After(stopGrace):
		t.Fatalf("testenv: walwatch %d still runs 10 s after SIGKILL", run.cmd.Process.Pid)
	}
}

// Start starts walwatch again after Kill (or after it exited), with the
// same flags, socket and slot or server id, and waits until it is ready.
func (w *Walwatch) Start(t testing.TB) {
	t.Helper()
	if w.Running() {
		t.Fatalf("testenv: Start: walwatch %d still runs; Kill or Restart it", w.Pid())
	}
	w.start(t)
}

// stop is the cleanup: SIGTERM, SIGKILL after stopGrace.
func (w *Walwatch) stop(t testing.TB) {
	run := w.current()
	if run == nil {
		return
	}
	pid := run.cmd.Process.Pid
	select {
	case <-run.done:
	default:
		_ = syscall.Kill(-pid, syscall.SIGCONT)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-run.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-run.done
		}
	}
	// Anything it left in its group goes too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if t.Failed() {
		t.Logf("testenv: walwatch (pid %d) ended: %v\n%s", pid, run.state, w.stderrTail())
	}
}

// Stderr is everything walwatch wrote (stderr and stdout: its JSON log
// lines), from every process of this Walwatch, in order.
func (w *Walwatch) Stderr() string {
	text, _ := os.ReadFile(w.stderrPath)
	return string(text)
}

func (w *Walwatch) stderrTail() string {
	return fmt.Sprintf("---- walwatch stderr (%s) ----\n%s---- end of walwatch stderr ----", w.stderrPath, fileTail(w.stderrPath, 20000))
}

// WaitLog waits until a line that walwatch's current process wrote (since
// StartWalwatch, Start or Restart last started it) contains substr, and
// returns that line (without its newline), the first such. It fails t once
// bound has passed, or once walwatch exited without writing it.
func (w *Walwatch) WaitLog(t testing.TB, substr string, bound time.Duration) string {
	t.Helper()
	run := w.current()
	var found string
	err := waitFor(bound, func() error {
		exited := false
		select {
		case <-run.done:
			exited = true // read once more: its last lines may be the ones
		default:
		}
		if line, ok := w.findLine(run.stderrFrom, substr); ok {
			found = line
			return nil
		}
		if exited {
			return permanent(fmt.Errorf("walwatch exited (%v)", run.state))
		}
		return fmt.Errorf("no line yet")
	})
	if err != nil {
		t.Fatalf("testenv: no walwatch log line contains %q: %v\n%s", substr, err, w.stderrTail())
	}
	return found
}

// findLine looks for substr in the whole lines of the stderr file from
// offset from.
func (w *Walwatch) findLine(from int64, substr string) (string, bool) {
	f, err := os.Open(w.stderrPath)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "", false
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", false // the last line is incomplete or absent
		}
		if strings.Contains(line, substr) {
			return strings.TrimSuffix(line, "\n"), true
		}
	}
}
