package load

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The limits: what the machine does with no server logic at all, so that
// deployd's figures can be read as a multiple of the floor.

// listLimit serves pre-built responses from a bare net/http handler in the
// test process: each path answers its bytes with the headers deployd sent
// them with, nothing else.
type listLimit struct {
	srv *httptest.Server
}

// cannedResponse is one response the list limit replays byte for byte.
type cannedResponse struct {
	body            []byte
	contentType     string
	contentEncoding string
}

func startListLimit(tb testing.TB, responses map[string]cannedResponse) *listLimit {
	tb.Helper()
	mux := http.NewServeMux()
	for path, r := range responses {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", r.contentType)
			if r.contentEncoding != "" {
				h.Set("Content-Encoding", r.contentEncoding)
			}
			h.Set("Content-Length", fmt.Sprint(len(r.body)))
			_, _ = w.Write(r.body)
		})
	}
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return &listLimit{srv: srv}
}

// fanoutRole is the fan-out limit: a program that accepts SSE connections
// on GET /stream and writes each frame POSTed to /publish to every one of
// them, one loop per core over its share of the sockets. It prints its
// address on the first line of stdout and exits when stdin closes.
const fanoutRole = "fanout-limit"

// fanoutShard is one core's share of the connections and its loop.
type fanoutShard struct {
	frames chan []byte
	mu     sync.Mutex
	conns  []*fanoutConn
}

type fanoutConn struct {
	net.Conn
	closed atomic.Bool
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\nretry: 3000\n\n"

func runFanoutLimit() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shards := make([]*fanoutShard, runtime.GOMAXPROCS(0))
	for i := range shards {
		s := &fanoutShard{frames: make(chan []byte, 4096)}
		shards[i] = s
		go s.loop()
	}
	var next atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, _ *http.Request) {
		raw, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		c := &fanoutConn{Conn: raw}
		if _, err := io.WriteString(c, sseHead); err != nil {
			c.Close()
			return
		}
		s := shards[next.Add(1)%uint64(len(shards))]
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		// A client that hangs up is marked, and dropped by the next frame.
		go func() {
			var b [1]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					break
				}
			}
			c.closed.Store(true)
			c.Close()
		}()
	})
	mux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		frame, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, s := range shards {
			s.frames <- frame
		}
	})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println(ln.Addr().String())
	return exitCode(http.Serve(ln, mux))
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// loop writes each frame to every open connection of the shard.
func (s *fanoutShard) loop() {
	for frame := range s.frames {
		s.mu.Lock()
		kept := s.conns[:0]
		for _, c := range s.conns {
			if c.closed.Load() {
				continue
			}
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(frame); err != nil {
				c.Close()
				continue
			}
			kept = append(kept, c)
		}
		clear(s.conns[len(kept):])
		s.conns = kept
		s.mu.Unlock()
	}
}

// fanoutLimit is the harness's handle on the fan-out limit's process.
type fanoutLimit struct {
	Base  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pub   *http.Client
}

// startFanoutLimit re-executes the test binary as the fan-out limit.
func startFanoutLimit(tb testing.TB) *fanoutLimit {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleEnv+"="+fanoutRole)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	l := &fanoutLimit{cmd: cmd, stdin: stdin, pub: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the fan-out limit did not start: %v", err)
	}
	l.Base = "http://" + strings.TrimSpace(line)
	return l
}

// PID is the limit process's id.
func (l *fanoutLimit) PID() int { return l.cmd.Process.Pid }

// publish hands the limit one frame to write to all its connections.
func (l *fanoutLimit) publish(frame []byte) error {
	resp, err := l.pub.Post(l.Base+"/publish", "text/event-stream", bytes.NewReader(frame))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("publish: %s", resp.Status)
	}
	return nil
}
