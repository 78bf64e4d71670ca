//go:build k8s_v037

package apistorage_test

var unsteady = map[string][]string{
	"Postgres/List": unsteadyList,
	"MariaDB/List":  unsteadyList,
	// See known_failures_v032_test.go.
	"MariaDB/GetListNonRecursive": {"existing_key,_resourceVersion=current,_resourceVersionMatch=exact"},
}

// RunTestList's subtests at "continueRV + 1" and "continueRV + 2".
var unsteadyList = []string{
	"test_List_with_future_resource_version,_match=Exact",
	"test_List_with_continue,_resource_version_after_writes",
	"test_List_with_limit,_resource_version_after_writes,_match=Exact",
	"test_List_with_resource_version_after_writes,_match=Exact",
}

// The v0.37 suite's failures. Its RunTestList lists at the RV of each of
// its writes in turn (whyHistory), and assumes that RVs are consecutive
// integers (whyCompaction: "continueRV + 2" is a future RV).
var knownFailures = map[string]knownFailure{
	"Postgres/CompactRevision": {nil, whyCompactRevision},
	"MariaDB/CompactRevision":  {nil, whyCompactRevision},
	"Postgres/ConsistentList": {[]string{
		"LIST_without_RV_returns_consistent_RV",
		"List_with_negative_continue_RV_returns_consistent_RV",
		"Non-consistent_list_before_consistent_read",
		"Non-consistent_request_after_consistent_read",
	}, whyCompaction},
	"MariaDB/ConsistentList": {[]string{
		"LIST_without_RV_returns_consistent_RV",
		"List_with_negative_continue_RV_returns_consistent_RV",
		"Non-consistent_list_before_consistent_read",
		"Non-consistent_request_after_consistent_read",
	}, whyCompaction},
	"Postgres/Get": {nil, whyTTL},
	"MariaDB/Get":  {nil, whyTTL},
	"Postgres/GetListNonRecursive": {[]string{
		"existing_key,_resourceVersion=previous,_resourceVersionMatch=exact",
	}, whyHistory},
	"MariaDB/GetListNonRecursive": {[]string{
		"existing_key,_resourceVersion=previous,_resourceVersionMatch=exact",
	}, whyHistory},
	"Postgres/KeySchema": {nil, whyPrefixKey},
	"MariaDB/KeySchema":  {nil, whyPrefixKey},
	"Postgres/List":      {listFailures, whyHistory + "; " + whyCompaction},
	"MariaDB/List":       {listFailures, whyHistory + "; " + whyCompaction},
	"Postgres/WatchSemantics": {[]string{
		"allowWatchBookmarks=false,_sendInitialEvents=false,_RV=1",
		"allowWatchBookmarks=true,_sendInitialEvents=false,_RV=1",
	}, whyHistory},
	"MariaDB/WatchSemantics": {[]string{
		"allowWatchBookmarks=false,_sendInitialEvents=false,_RV=1",
		"allowWatchBookmarks=true,_sendInitialEvents=false,_RV=1",
	}, whyHistory},
}

// RunTestList's failures, the same on both databases: lists at the RV of
// each earlier write (whyHistory), and at "continueRV + 1", etcd's
// revision after the test's compaction (whyCompaction).
var listFailures = []string{
	"test_List_on_existing_key_with_resource_version_set_after_creation,_match=Exact",
	"test_List_on_existing_key_with_resource_version_set_before_creation,_match=Exact",
	"test_List_on_existing_key_with_resource_version_set_before_update,_match=Exact",
	"test_List_with_continue,_resource_version_of_fifth_write",
	"test_List_with_continue,_resource_version_of_first_write",
	"test_List_with_continue,_resource_version_of_second_write",
	"test_List_with_continue,_resource_version_of_seventh_write",
	"test_List_with_continue,_resource_version_of_six_write",
	"test_List_with_continue,_resource_version_of_third_write",
	"test_List_with_continue_from_second_pod,_negative_resource_version_gives_consistent_read",
	"test_List_with_continue_from_second_pod_and_limit,_negative_resource_version_gives_consistent_read",
	"test_List_with_continue_from_third_pod,_negative_resource_version_gives_consistent_read",
	"test_List_with_limit",
	"test_List_with_limit,_resource_version_of_fifth_write,_match=Exact",
	"test_List_with_limit,_resource_version_of_fourth_write,_match=Exact",
	"test_List_with_limit,_resource_version_of_second_write,_match=Exact",
	"test_List_with_limit,_resource_version_of_seventh_write,_match=Exact",
	"test_List_with_limit,_resource_version_of_six_write,_match=Exact",
	"test_List_with_limit,_resource_version_of_third_write,_match=Exact",
	"test_List_with_limit_at_resource_version_after_created_and_match=Exact",
	"test_List_with_limit_at_resource_version_before_created_and_match=Exact",
	"test_List_with_resource_version_of_fifth_write,_match=Exact",
	"test_List_with_resource_version_of_first_write,_match=Exact",
	"test_List_with_resource_version_of_fourth_write,_match=Exact",
	"test_List_with_resource_version_of_second_write,_match=Exact",
	"test_List_with_resource_version_of_seventh_write,_match=Exact",
	"test_List_with_resource_version_of_six_write,_match=Exact",
	"test_List_with_resource_version_of_third_write,_match=Exact",
	"test_consistent_List",
}
