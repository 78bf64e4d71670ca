package testenv

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// Pause holds bytes back, Resume lets them through, CutAll closes the
// connection, and a new one is forwarded again.
func TestProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p := NewProxy(t, echo.Addr().String())

	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(s string) {
		t.Helper()
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		expect(t, c, s)
	}
	roundTrip("a")

	p.Pause()
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("paused: read %d bytes, %v; want nothing", n, err)
	}
	p.Resume()
	expect(t, c, "b")

	p.CutAll()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("cut: read %d bytes, %v; want EOF", n, err)
	}
	c, err = net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip("c")
	if p.Connections() != 1 {
		t.Errorf("Connections() = %d, want 1", p.Connections())
	}
}

func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}
