//go:build !k8s_v037

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
)

var knownFailures = map[string]knownFailure{
	"Postgres/WatchSemantics": {[]string{
		"allowWatchBookmarks=true,_sendInitialEvents=false,_RV=1",
		"allowWatchBookmarks=false,_sendInitialEvents=false,_RV=1",
	}, whyHistory},
	"MariaDB/WatchSemantics": {[]string{
		"allowWatchBookmarks=true,_sendInitialEvents=false,_RV=1",
		"allowWatchBookmarks=false,_sendInitialEvents=false,_RV=1",
	}, whyHistory},
	"Postgres/Get":   {nil, whyTTL},
	"MariaDB/Get":    {nil, whyTTL},
	"Postgres/Count": {nil, whyKeys},
	"MariaDB/Count":  {nil, whyKeys},
	"Postgres/ConsistentList": {[]string{
		"Non-consistent_list_before_sync",
		"Consistent_request_returns_currentRV",
		"Non-consistent_request_after_sync_returns_currentRV",
	}, whyCompaction},
	"MariaDB/ConsistentList": {[]string{
		"Non-consistent_list_before_sync",
		"Consistent_request_returns_currentRV",
		"Non-consistent_request_after_sync_returns_currentRV",
	}, whyCompaction},
	"Postgres/List": {[]string{
		"test_consistent_List", // whyCompaction
		"test_List_with_limit_at_resource_version_before_first_write_and_match=Exact",
		"test_List_on_existing_key_with_resource_version_set_before_first_write,_match=Exact",
	}, whyHistory + "; " + whyCompaction},
	"MariaDB/List": {[]string{
		"test_consistent_List", // whyCompaction
		"test_List_with_limit_at_resource_version_before_first_write_and_match=Exact",
		"test_List_on_existing_key_with_resource_version_set_before_first_write,_match=Exact",
	}, whyHistory + "; " + whyCompaction},
	"Postgres/GetListNonRecursive": {[]string{
		"existing_key,_resourceVersion=previous,_resourceVersionMatch=exact",
		"existing_key,_resourceVersion=current,_resourceVersionMatch=exact", // whyCompactPG
	}, whyHistory + "; " + whyCompactPG},
	"MariaDB/GetListNonRecursive": {[]string{
		"existing_key,_resourceVersion=previous,_resourceVersionMatch=exact",
	}, whyHistory},
}

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
