package apistorage_test

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// knownFailureEnv names the one listed test a child run of the test binary
// runs (see TestStorageKnownFailuresOnPostgresAndMariaDB).
const knownFailureEnv = "WALWATCH_APISTORAGE_KNOWN_FAILURE"

// knownFailures, by "<database>/<test>", are in known_failures_v032_test.go
// and known_failures_v037_test.go: the suites of the two releases differ.
// So is unsteady: by "<database>/<test>", the subtests that may pass or
// fail, because they do arithmetic on RVs (etcd's are consecutive
// integers: "continueRV + 1" names the next write), and whether a WAL or
// binlog position that near lies within a snapshot's range of RVs depends
// on what the server's other databases wrote meanwhile.

// knownFailure is how one of the suite's tests fails on one database: the
// subtests that fail (as go test names them), or none if the test fails as
// a whole; and why, in a few words. PROTOCOL.md ("A storage.Interface over
// the table") explains each reason in full, by its number.
type knownFailure struct {
	subtests []string
	why      string
}

const (
	whyHistory    = "(1) a watch or list at an RV whose state walwatch or the table no longer has"
	whyTTL        = "(2) a TTL, for which the table has no column"
	whyKeys       = "(3) keys outside the store's resource"
	whyCompaction = "(4) etcd's compaction is a write, one revision"
	whyCompactPG  = "(5) the tests' compaction on PostgreSQL forgets up to now, not up to the given RV"
	// v0.37's suite only:
	whyCompactRevision = "(6) etcd records the revision it compacted to; walwatch forgets by time"
	whyPrefixKey       = "(7) an object at the resource prefix itself (\"/pods/\"), which no row can be"
)

// TestStorageKnownFailuresOnPostgresAndMariaDB runs each listed test in a
// child run of this test binary and checks that it fails exactly as
// listed: the listed subtests fail, every other subtest passes. A listed
// test or subtest that passes, or one that fails unlisted, fails this test:
// the list (and PROTOCOL.md's table) is then out of date.
func TestStorageKnownFailuresOnPostgresAndMariaDB(t *testing.T) {
	if os.Getenv(knownFailureEnv) != "" {
		return // a child: it runs TestStorageOnPostgresAndMariaDB only
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(knownFailures))
	for name := range knownFailures {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kf := knownFailures[name]
			dialect, test, _ := strings.Cut(name, "/")
			cmd := exec.Command(self, "-test.v", "-test.count=1",
				"-test.run", "^TestStorageOnPostgresAndMariaDB$/^"+dialect+"$/^"+test+"$")
			cmd.Env = append(os.Environ(), knownFailureEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatalf("running %s: %v", name, err)
			}
			prefix := "TestStorageOnPostgresAndMariaDB/" + name
			failed, ran := failedSubtests(string(out), prefix)
			if !ran {
				t.Fatalf("%s did not run (its name changed?):\n%s", name, out)
			}
			if err == nil {
				t.Errorf("%s passes now: remove it from knownFailures and from PROTOCOL.md's table", name)
				return
			}
			if len(kf.subtests) == 0 && len(failed) > 0 {
				t.Errorf("%s: listed as failing whole, but these subtests fail: %v", name, failed)
			}
			want := map[string]bool{}
			for _, s := range unsteady[name] {
				delete(failed, s)
			}
			for _, s := range kf.subtests {
				want[s] = true
				if !failed[s] {
					t.Errorf("%s/%s passes now: remove it from knownFailures and from PROTOCOL.md's table", name, s)
				}
			}
			for s := range failed {
				if !want[s] && len(kf.subtests) > 0 {
					t.Errorf("%s/%s fails, and is not listed:\n%s", name, s, out)
				}
			}
		})
	}
}

// failedSubtests reads a child's -test.v output: the direct subtests of
// prefix that failed, and whether prefix ran at all.
func failedSubtests(out, prefix string) (map[string]bool, bool) {
	failed := map[string]bool{}
	ran := false
	line := regexp.MustCompile(`--- (FAIL|PASS): (\S+) \(`)
	for _, m := range line.FindAllStringSubmatch(out, -1) {
		name := m[2]
		if name == prefix {
			ran = true
			continue
		}
		sub, ok := strings.CutPrefix(name, prefix+"/")
		if !ok || strings.Contains(sub, "/") {
			continue
		}
		if m[1] == "FAIL" {
			failed[sub] = true
		}
	}
	return failed, ran
}
