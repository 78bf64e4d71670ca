package walwatchstorage

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/walwatch/walwatch/clients/go/walwatchgorm"
)

// heldList is a paged list whose snapshot is held between its pages: every
// page reads the same snapshot, so the pages together are the table exactly
// at the list's RV, as one unpaged list would be.
type heldList struct {
	id       string
	key      string // the resource and query the list is of
	snapshot *walwatchgorm.Snapshot
	q        *query
	lastUsed time.Time
}

// heldLists holds at most max lists, each until it is idle for idle. A list
// is taken out while a page is read from it and put back after, so that one
// list serves one page at a time (a client asks for its pages in turn).
type heldLists struct {
	max  int
	idle time.Duration

	mu      sync.Mutex
	lists   map[string]*heldList
	stop    chan struct{}
	stopped bool
}

func newHeldLists(max int, idle time.Duration) *heldLists {
	return &heldLists{max: max, idle: idle, lists: map[string]*heldList{}}
}

// add holds l, which is not held yet; false if max lists are held (l then
// stays the caller's).
func (h *heldLists) add(l *heldList) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || len(h.lists) >= h.max {
		return false
	}
	if h.stop == nil {
		h.stop = make(chan struct{})
		go h.expireLoop(h.stop)
	}
	l.lastUsed = time.Now()
	h.lists[l.id] = l
	return true
}

// take takes the list id out, or nil if it is not held (never was, expired,
// on another APIServer replica, or being read by another request).
func (h *heldLists) take(id string) *heldList {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.lists[id]
	delete(h.lists, id)
	return l
}

// put holds a taken list again; if that is no longer possible it is closed.
func (h *heldLists) put(l *heldList) {
	h.mu.Lock()
	if !h.stopped {
		l.lastUsed = time.Now()
		h.lists[l.id] = l
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	l.snapshot.Close()
}

func (h *heldLists) expireLoop(stop chan struct{}) {
	tick := time.NewTicker(h.idle / 4)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			var idle []*heldList
			h.mu.Lock()
			for id, l := range h.lists {
				if now.Sub(l.lastUsed) >= h.idle {
					idle = append(idle, l)
					delete(h.lists, id)
				}
			}
			h.mu.Unlock()
			for _, l := range idle {
				l.snapshot.Close()
			}
		}
	}
}

// closeAll closes every held list, and holds none from now on.
func (h *heldLists) closeAll() {
	h.mu.Lock()
	lists := h.lists
	h.lists = map[string]*heldList{}
	h.stopped = true
	if h.stop != nil {
		close(h.stop)
	}
	h.mu.Unlock()
	for _, l := range lists {
		l.snapshot.Close()
	}
}

func (h *heldLists) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lists)
}

// continueToken is a paged list's continue: which held list, and where in it.
// It is base64 of JSON, so it never reads as a number (a number is
// Clusterpedia's offset).
type continueToken struct {
	ID              string `json:"id"`
	Offset          int64  `json:"offset"`
	ResourceVersion string `json:"rv"`
}

func (t continueToken) encode() string {
	data, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, err
	}
	if t.ID == "" || t.Offset <= 0 {
		return t, errMalformedToken
	}
	return t, nil
}

func newListID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
