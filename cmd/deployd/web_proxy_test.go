package main

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy is a TCP proxy in front of a server that a test can cut (every
// open connection closed, new ones closed as soon as accepted, as when a
// network drops) and restore.
type cutProxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
	closed bool

	wg sync.WaitGroup
}

// listenCutProxy listens on a free loopback port; forward starts it.
// It is closed when the test ends.
func listenCutProxy(t *testing.T) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's http URL.
func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

// forward starts accepting and forwarding to target. The accept loop ends
// when the proxy is closed.
func (p *cutProxy) forward(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return // closed
			}
			p.serve(c)
		}
	}()
}

// serve pipes one accepted connection to the target, on two goroutines
// that end when either side closes.
func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	cut, target := p.cut || p.closed, p.target
	p.mu.Unlock()
	if cut {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		p.untrack(dst, src)
	}
	p.wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
}

func (p *cutProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cutProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// Cut drops every connection and refuses new ones until Restore.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore forwards new connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// close stops the proxy and waits for its goroutines. Idempotent.
func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
