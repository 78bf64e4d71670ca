package apistorage

import (
	"sync"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatch"
)

// heldSnapshots keeps the snapshots of recent lists, one per RV, for a
// while after their last use: a list at one of those RVs (the next page of
// a paged list, resourceVersionMatch=Exact) reads the held snapshot, so it
// shows that RV's state exactly, as etcd's MVCC shows an uncompacted
// revision's. Each held snapshot keeps a database connection and, on
// PostgreSQL, holds back VACUUM: they are few, and let go when idle.
//
// A snapshot is read by one list at a time (it is one transaction on one
// connection); lists at the same RV wait for each other.
type heldSnapshots struct {
	max  int
	idle time.Duration

	mu     sync.Mutex
	held   []*heldSnapshot
	closed bool
}

type heldSnapshot struct {
	rv uint64

	// use is held while a list reads snap, and to close it.
	use    sync.Mutex
	snap   *walwatch.Snapshot
	gone   bool // closed: no list may read it
	parent *heldSnapshots

	lastUsed time.Time // under parent.mu
}

// acquire returns the held snapshot at rv, for the caller alone until it
// calls release; nil if none is held.
func (h *heldSnapshots) acquire(rv uint64) *heldSnapshot {
	h.mu.Lock()
	var s *heldSnapshot
	for _, o := range h.held {
		if o.rv == rv {
			s = o
			break
		}
	}
	h.mu.Unlock()
	if s == nil {
		return nil
	}
	s.use.Lock()
	if s.gone {
		s.use.Unlock()
		return nil
	}
	return s
}

// release ends a list's use of s.
func (h *heldSnapshots) release(s *heldSnapshot) {
	h.mu.Lock()
	s.lastUsed = time.Now()
	h.mu.Unlock()
	s.use.Unlock()
}

// add holds snap, a new snapshot at rv that a list has read, unless one at
// rv is held already (same RV, same state: snap is closed); the least
// recently used leave beyond max.
func (h *heldSnapshots) add(snap *walwatch.Snapshot, rv uint64) {
	h.mu.Lock()
	if h.closed || h.max <= 0 {
		h.mu.Unlock()
		snap.Close()
		return
	}
	for _, o := range h.held {
		if o.rv == rv {
			o.lastUsed = time.Now()
			h.mu.Unlock()
			snap.Close()
			return
		}
	}
	s := &heldSnapshot{rv: rv, snap: snap, parent: h, lastUsed: time.Now()}
	h.held = append(h.held, s)
	var out []*heldSnapshot
	for len(h.held) > h.max {
		// The least recently used leaves.
		lru := 0
		for i, o := range h.held {
			if o.lastUsed.Before(h.held[lru].lastUsed) {
				lru = i
			}
		}
		out = append(out, h.held[lru])
		h.held = append(h.held[:lru], h.held[lru+1:]...)
	}
	h.mu.Unlock()
	for _, o := range out {
		go o.close()
	}
	time.AfterFunc(h.idle, s.expire)
}

// expire closes s once it has been idle for the set's idle time.
func (s *heldSnapshot) expire() {
	h := s.parent
	h.mu.Lock()
	idle := time.Since(s.lastUsed)
	held := false
	for i, o := range h.held {
		if o == s {
			held = true
			if idle >= h.idle {
				h.held = append(h.held[:i], h.held[i+1:]...)
			}
			break
		}
	}
	h.mu.Unlock()
	switch {
	case !held:
	case idle >= h.idle:
		s.close()
	default:
		time.AfterFunc(h.idle-idle, s.expire)
	}
}

// close closes s once no list reads it.
func (s *heldSnapshot) close() {
	s.use.Lock()
	defer s.use.Unlock()
	if !s.gone {
		s.gone = true
		s.snap.Close()
	}
}

// drop lets go of the held snapshots that keep returns false for.
func (h *heldSnapshots) drop(keep func(rv uint64) bool) {
	h.mu.Lock()
	var out []*heldSnapshot
	kept := h.held[:0]
	for _, o := range h.held {
		if keep(o.rv) {
			kept = append(kept, o)
		} else {
			out = append(out, o)
		}
	}
	h.held = kept
	h.mu.Unlock()
	for _, o := range out {
		o.close()
	}
}

// closeAll closes every held snapshot, and holds none from now on.
func (h *heldSnapshots) closeAll() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.drop(func(uint64) bool { return false })
}
