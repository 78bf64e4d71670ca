// Package apistorage is a storage.Interface of k8s.io/apiserver over
// Clusterpedia's `resources` table, whose watches come from walwatch: any
// k8s.io/apiserver-based server can keep its objects in PostgreSQL or
// MySQL/MariaDB and get push watches, ordered by commit, without polling.
//
// Reads and writes are plain SQL on the table; lists and fresh reads take
// their RV through walwatch's handoff; watches are walwatch's streams,
// filtered by the predicate here as etcd3's watcher filters etcd's events.
//
// # resourceVersions
//
// An object's resourceVersion is walwatch's RV of the transaction that last
// wrote it (its commit position), which the writer cannot know before it
// commits. So a write stores a unique write id ("w" and 24 hex digits) as
// the object's metadata.resourceVersion and in the resource_version column,
// commits, and waits for walwatch's event of that write on the store's own
// stream (the write id is in the event's
// walwatch.clusterpedia.io/member-resource-version annotation, and the
// event's RV is the commit's). A write therefore returns once walwatch has
// streamed it: while walwatch is down, writes wait (for their context).
// The store's next write records the RV in the row, in its own transaction
// (UPDATE ... SET resource_version = RV WHERE resource_version = <write id>,
// which changes neither the object nor a key, so walwatch sends no event
// for it), so that recording adds no transaction and no RV, and a list
// after a write has that write's RV, as on etcd. Close records the last
// ones. Reads that meet a write id not yet recorded resolve it through the
// same stream.
//
// A conditional write (GuaranteedUpdate, Delete) is a compare-and-swap on
// the resource_version column: it matches the exact value it read.
//
// See PROTOCOL.md, "A storage.Interface over the table", for what
// k8s.io/apiserver's storage tests say of it.
//
// storage.Interface changed in k8s.io/apiserver v0.36 (Stats,
// GetCurrentResourceVersion, CompactRevision and
// EnableResourceSizeEstimation in place of Count): store_v032.go builds by
// default, store_v037.go with the build tag k8s_v037, which
// tests/tools/run-go-tests.sh sets for go.k8s-v0.37.mod.
package apistorage
