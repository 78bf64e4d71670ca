package apistorage

// ReleaseHeldSnapshots lets go of the store's held snapshots at or below
// upTo: the tests' compaction, after which a list at such an RV is served
// only if nothing changed since, as etcd serves none at or below its
// compacted revision.
func ReleaseHeldSnapshots(s *Store, upTo uint64) {
	s.held.drop(func(rv uint64) bool { return rv > upTo })
}
