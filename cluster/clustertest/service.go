package clustertest

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Service is what a Kubernetes Service does for a test's replicas of
// deployd: a TCP listener that sends each new connection to the next ready
// backend in turn (ready: its health URL answers 200, polled every 100 ms,
// as endpoints follow readiness), skipping one that refuses the
// connection. A connection stays on its backend until either side closes
// it. It belongs to the test that started it and stops with it.
type Service struct {
	Base     string // http://address of the listener
	ln       net.Listener
	backends []*serviceBackend

	mu    sync.Mutex
	next  int
	conns map[net.Conn]struct{}

	toClients atomic.Int64
	refused   atomic.Int64
	none      atomic.Int64
}

// Backend is one replica behind a Service: the address it listens on and
// the URL whose 200 marks it ready.
type Backend struct {
	Addr, Health string
}

type serviceBackend struct {
	addr  string
	ready atomic.Bool
	conns atomic.Int64 // connections relayed to it so far
}

// StartService listens on a free loopback port in front of the backends.
func StartService(t testing.TB, backends ...Backend) *Service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Service{Base: "http://" + ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, be := range backends {
		b := &serviceBackend{addr: be.Addr}
		p.backends = append(p.backends, b)
		wg.Go(func() { b.poll(ctx, be.Health) })
	}
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(conn)
		}
	})
	t.Cleanup(func() {
		cancel()
		ln.Close()
		p.Cut()
		wg.Wait()
	})
	return p
}

func (b *serviceBackend) poll(ctx context.Context, url string) {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.ready.Store(ok)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitReady waits until the Service sees every backend ready.
func (p *Service) WaitReady(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !p.allReady() {
		if time.Now().After(deadline) {
			t.Fatalf("the service did not see every backend ready within %s", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Service) allReady() bool {
	for _, b := range p.backends {
		if !b.ready.Load() {
			return false
		}
	}
	return true
}

// order is the ready backends, starting with the next one's turn.
func (p *Service) order() []*serviceBackend {
	p.mu.Lock()
	start := p.next
	p.next = (p.next + 1) % len(p.backends)
	p.mu.Unlock()
	var out []*serviceBackend
	for i := range p.backends {
		if b := p.backends[(start+i)%len(p.backends)]; b.ready.Load() {
			out = append(out, b)
		}
	}
	return out
}

func (p *Service) relay(in net.Conn) {
	var out net.Conn
	for _, b := range p.order() {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			out = c
			b.conns.Add(1)
			break
		}
		p.refused.Add(1)
	}
	if out == nil {
		p.none.Add(1)
		in.Close()
		return
	}
	p.mu.Lock()
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		out.Close()
		in.Close()
		close(done)
	}()
	_, _ = io.Copy(countingWriter{w: in, n: &p.toClients}, out)
	in.Close()
	out.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// Cut closes every connection the Service relays, as a network failure
// would: each client connects again, to the next ready backend in turn.
// It answers how many client connections it closed.
func (p *Service) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	return len(p.conns) / 2
}

// Spread is how many connections each backend was sent so far.
func (p *Service) Spread() []int64 {
	out := make([]int64, len(p.backends))
	for i, b := range p.backends {
		out[i] = b.conns.Load()
	}
	return out
}

// ToClients is the bytes relayed from the backends to the clients so far.
func (p *Service) ToClients() int64 { return p.toClients.Load() }

// Refused is how many dials a backend refused.
func (p *Service) Refused() int64 { return p.refused.Load() }

// Unserved is how many connections were closed for want of a backend.
func (p *Service) Unserved() int64 { return p.none.Load() }

// countingWriter counts the bytes written through it as they go.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
