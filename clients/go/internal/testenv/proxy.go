package testenv

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to one
// target, and can stop forwarding (a stalled network: a lagging walwatch)
// or cut every connection (a broken one). Start walwatch through it with
// WalwatchOptions.ViaProxy. It is closed at t.Cleanup.
//
// Its methods are safe for concurrent use.
type Proxy struct {
	// Addr is where the proxy listens, "127.0.0.1:PORT".
	Addr string

	target   string
	listener net.Listener
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	paused chan struct{} // nil while forwarding; closed by Resume
	closed bool
}

// proxyConn is one forwarded connection: the client's side and the
// target's.
type proxyConn struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{} // closed when the connection is cut
	paused           chan struct{} // guarded by the proxy's mu: this one alone paused
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.upstream.Close()
	})
}

// NewProxy listens on a free port of 127.0.0.1 and forwards to target, a
// TCP "host:port" (db.Addr()) or, if it starts with "/", a Unix socket.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, listener: l, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *Proxy) port() int { return p.listener.Addr().(*net.TCPAddr).Port }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		network := "tcp"
		if strings.HasPrefix(p.target, "/") {
			network = "unix"
		}
		upstream, err := net.DialTimeout(network, p.target, 10*time.Second)
		if err != nil {
			client.Close() // as a refused connection would look to the client
			continue
		}
		c := &proxyConn{client: client, upstream: upstream, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.forward(c, client, upstream)
		go p.forward(c, upstream, client)
	}
}

// forward copies src to dst. While paused, bytes already read wait, and
// no more are read, so the sender's socket buffers fill up as on a stalled
// network.
func (p *Proxy) forward(c *proxyConn, src, dst net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitForwarding(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // either side closed: close both, as the protocols need no half-close
		}
	}
}

// waitForwarding waits while the proxy is paused; false if c was cut
// meanwhile.
func (p *Proxy) waitForwarding(c *proxyConn) bool {
	for {
		p.mu.Lock()
		paused := p.paused
		if paused == nil {
			paused = c.paused
		}
		p.mu.Unlock()
		if paused == nil {
			return true
		}
		select {
		case <-paused:
		case <-c.done:
			return false
		}
	}
}

func (p *Proxy) drop(c *proxyConn) {
	c.close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Pause stops forwarding in both directions, on every connection, open or
// new; the connections stay open. It returns at once.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

// PauseUpstream stops forwarding on the open connections whose side
// towards the target has the local port port (as the target sees it: the
// client_port of pg_stat_replication, the port in MariaDB's processlist),
// and on no other. It returns how many it paused.
func (p *Proxy) PauseUpstream(port int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if a, ok := c.upstream.LocalAddr().(*net.TCPAddr); ok && a.Port == port && c.paused == nil {
			c.paused = make(chan struct{})
			n++
		}
	}
	return n
}

// Resume forwards again what Pause and PauseUpstream held, and everything
// after it.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
	for c := range p.conns {
		if c.paused != nil {
			close(c.paused)
			c.paused = nil
		}
	}
}

// CutAll closes every connection, both its sides, at once. New connections
// are forwarded as before (paused if the proxy is paused).
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// Connections is how many connections are open through the proxy now.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.listener.Close()
	p.Resume()
	p.CutAll()
	p.wg.Wait()
}
