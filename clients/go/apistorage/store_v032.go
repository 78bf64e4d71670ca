//go:build !k8s_v037

package apistorage

import "context"

// What storage.Interface has up to k8s.io/apiserver v0.35 only.

func (s *Store) Count(key string) (int64, error) {
	sc, err := s.parseKey(key, true)
	if err != nil {
		return 0, err
	}
	return s.count(context.Background(), sc)
}

// checkKey: before v0.36, etcd3 accepted any key; the store reads nothing
// at a key no object can have, and refuses to write there.
func (s *Store) checkKey(key string, recursive bool) error { return nil }
