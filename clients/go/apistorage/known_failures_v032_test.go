//go:build !k8s_v037

package apistorage_test

// After the tests' compaction, MariaDB's walwatch keeps the last write or
// not, as other databases wrote to the server's binlog meanwhile or not
// (whyCompactPG is the same, steady, on PostgreSQL).
var unsteady = map[string][]string{
	"MariaDB/GetListNonRecursive": {"existing_key,_resourceVersion=current,_resourceVersionMatch=exact"},
}

// The v0.32 suite's failures.
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
