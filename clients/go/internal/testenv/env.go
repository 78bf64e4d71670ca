package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// howToRun ends every message about a missing server or binary.
const howToRun = "run the Go tests through `make test` (tests/tools/run-tests.sh), which builds walwatch and starts the shared PostgreSQL and MariaDB"

// Bounds of the waits on conditions: generous, since two cores may be busy
// with parallel tests; a condition that holds returns at once.
const (
	serverBound = 60 * time.Second // a server accepting connections
	readyBound  = 60 * time.Second // walwatch's /readyz answering 200
	stopGrace   = 10 * time.Second // SIGTERM to SIGKILL
)

// SourceDir is the repository's root: WALWATCH_SOURCE_DIR, or the nearest
// directory upwards from the working directory that holds
// schema/clusterpedia.sql. It fails t if there is none.
func SourceDir(t testing.TB) string {
	t.Helper()
	dir, err := sourceDir()
	if err != nil {
		t.Fatalf("testenv: %v; %s", err, howToRun)
	}
	return dir
}

var sourceDir = sync.OnceValues(func() (string, error) {
	if dir := os.Getenv("WALWATCH_SOURCE_DIR"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "schema", "clusterpedia.sql")); err != nil {
			return "", fmt.Errorf("WALWATCH_SOURCE_DIR=%s holds no schema/clusterpedia.sql", dir)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "schema", "clusterpedia.sql")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no schema/clusterpedia.sql above %s and WALWATCH_SOURCE_DIR is unset", wd)
		}
		dir = parent
	}
})

// Binary is the walwatch binary the tests run: WALWATCH_BINARY, or
// <source>/build/walwatch. It fails t if it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("WALWATCH_BINARY")
	if path == "" {
		path = filepath.Join(SourceDir(t), "build", "walwatch")
	}
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		t.Fatalf("testenv: no walwatch binary at %s (WALWATCH_BINARY, default <source>/build/walwatch); %s", path, howToRun)
	}
	return path
}

// keepLogs is WALWATCH_TEST_KEEP_LOGS=1, as the C++ tests read it: keep
// databases and private servers for a look after the run.
func keepLogs() bool { return os.Getenv("WALWATCH_TEST_KEEP_LOGS") == "1" }

// nameCounter makes names unique within the process; the pid makes them
// unique among the test binaries sharing a server.
var nameCounter atomic.Int64

// uniqueName is prefix, the pid, a counter and t.Name(), lower-cased, with
// every character outside [a-z0-9] turned into '_': a PostgreSQL identifier
// and slot name, and a MariaDB database name, of at most 63 bytes. A longer
// one keeps its start and ends with a hash of the whole, so that two
// subtests whose names differ only at the end stay apart.
func uniqueName(prefix, testName string) string {
	name := fmt.Sprintf("%s%d_%d_%s", prefix, os.Getpid(), nameCounter.Add(1), testName)
	return fitName(sanitize(name), 63)
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// fitName cuts name to max bytes, replacing the end by "_" and 16 hex
// digits of a hash of the whole.
func fitName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s_%016x", name[:max-17], h.Sum64())
}

// runTool runs a command and returns its combined output. Output goes to a
// file, not a pipe: a server the tool leaves running (pg_ctl start) must
// not hold the test's pipe, or Wait would wait for the server to end.
func runTool(timeout time.Duration, env []string, argv ...string) (string, error) {
	out, err := os.CreateTemp("", "testenv-tool-*.out")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/" // the tools may run as another user, who cannot read the working directory
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("still running after %v; killed", timeout)
	}
	text, _ := os.ReadFile(out.Name())
	if err != nil {
		return string(text), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(text))
	}
	return string(text), nil
}

// parseExports reads the `export K=V K=V` lines the sandbox scripts print.
func parseExports(text string) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "export" {
			continue
		}
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				vars[k] = v
			}
		}
	}
	return vars
}

func portOf(vars map[string]string, key string) (int, error) {
	port, err := strconv.Atoi(vars[key])
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port", key, vars[key])
	}
	return port, nil
}

// tail is the end of text, at most max bytes, cut at a line start.
func tail(text string, max int) string {
	if len(text) <= max {
		return text
	}
	cut := text[len(text)-max:]
	if nl := strings.IndexByte(cut, '\n'); nl >= 0 {
		cut = cut[nl+1:]
	}
	return fmt.Sprintf("...(%d bytes cut)...\n%s", len(text)-len(cut), cut)
}

// fileTail is tail of a file's content, or why it cannot be read.
func fileTail(path string, max int) string {
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return tail(string(text), max)
}

// processGone is whether pid has ended: no such process, or a zombie that
// nobody reaped (a killed server whose parent is gone may stay one).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no such process
	}
	// The state follows the command name, which may hold spaces and ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// permanentError is a condition's error that no wait will cure.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// permanent makes cond's err end waitFor at once.
func permanent(err error) error { return permanentError{err} }

// waitFor polls cond every 20 ms until it holds (nil), returns a permanent
// error, or bound passes; it returns cond's last error.
func waitFor(bound time.Duration, cond func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return p.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", bound, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
