//go:build k8s_v037

package apistorage

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/storage"
)

// What storage.Interface has from k8s.io/apiserver v0.36 on.

// Stats counts the store's rows. The average object size is not estimated
// (0, as etcd3's store without size-based list cost estimation).
func (s *Store) Stats(ctx context.Context) (storage.Stats, error) {
	n, err := s.count(ctx, scope{all: true})
	if err != nil {
		return storage.Stats{}, err
	}
	return storage.Stats{ObjectCount: n}, nil
}

// GetCurrentResourceVersion is the RV of a snapshot taken now: every write
// that returned before the call lies at or below it.
func (s *Store) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	snap, err := s.beginSnapshot(ctx)
	if err != nil {
		return 0, err
	}
	defer snap.Close()
	return s.versioner.ParseResourceVersion(snap.ResourceVersion())
}

// EnableResourceSizeEstimation is accepted and ignored: Stats estimates no
// size.
func (s *Store) EnableResourceSizeEstimation(storage.KeysFunc) error { return nil }

// CompactRevision is 0: the store compacts nothing; what walwatch no longer
// retains is answered 410 when asked for.
func (s *Store) CompactRevision() int64 { return 0 }

// checkKey refuses the keys etcd3 refuses from v0.36 on
// (storage.PrepareKey): empty, with "." or "..", or outside the resource.
func (s *Store) checkKey(key string, recursive bool) error {
	if _, err := storage.PrepareKey("/"+s.prefix+"/", key, recursive); err != nil {
		return storage.NewInternalError(fmt.Errorf("apistorage: %w", err))
	}
	return nil
}
