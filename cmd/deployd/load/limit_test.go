package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The limits: what the machine does with no server logic at all, so that
// deployd's figures can be read as a multiple of the floor.

// listLimitRole is the list limit: a bare net/http handler that answers
// each path with the bytes and headers deployd sent for it, nothing else.
// It is the test binary re-executed, so it pays what any server process
// pays that deployd pays too (the wake-up of another process on each
// request, a scheduler of its own), and its CPU is its own. It reads its
// responses from the JSON file cannedEnv names, prints its address on the
// first line of stdout and exits when stdin closes.
const listLimitRole = "list-limit"

// cannedEnv names the file of the list limit's responses.
const cannedEnv = "DEPLOYD_LOAD_CANNED"

// cannedResponse is one response the list limit replays byte for byte.
type cannedResponse struct {
	Body            []byte
	ContentType     string
	ContentEncoding string
}

// cannedHandler answers each path of responses with its bytes.
func cannedHandler(responses map[string]cannedResponse) http.Handler {
	mux := http.NewServeMux()
	for path, r := range responses {
		length := strconv.Itoa(len(r.Body))
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", r.ContentType)
			if r.ContentEncoding != "" {
				h.Set("Content-Encoding", r.ContentEncoding)
			}
			h.Set("Content-Length", length)
			_, _ = w.Write(r.Body)
		})
	}
	return mux
}

func runListLimit() int {
	raw, err := os.ReadFile(os.Getenv(cannedEnv))
	if err != nil {
		return exitCode(err)
	}
	var responses map[string]cannedResponse
	if err := json.Unmarshal(raw, &responses); err != nil {
		return exitCode(fmt.Errorf("%s: %w", cannedEnv, err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return exitCode(err)
	}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println(ln.Addr().String())
	return exitCode(http.Serve(ln, cannedHandler(responses)))
}

// listLimit is the harness's handle on the list limit: its own process,
// and the same handler in this process (here), which answers without a
// second process to wake and so shows what that costs.
type listLimit struct {
	*roleProcess
	here *httptest.Server
}

func startListLimit(tb testing.TB, responses map[string]cannedResponse) *listLimit {
	tb.Helper()
	raw, err := json.Marshal(responses)
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "canned.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	here := httptest.NewServer(cannedHandler(responses))
	tb.Cleanup(here.Close)
	return &listLimit{roleProcess: startRole(tb, listLimitRole, cannedEnv+"="+file), here: here}
}

// roleProcess is a helper program of the harness: the test binary
// re-executed in one of its roles (main_test.go), serving on Base.
type roleProcess struct {
	Base string
	cmd  *exec.Cmd
}

// startRole re-executes the test binary as role, with env added, and
// waits for the address it prints. The process ends with the test.
func startRole(tb testing.TB, role string, env ...string) *roleProcess {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
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
		tb.Fatalf("the %s did not start: %v", role, err)
	}
	return &roleProcess{Base: "http://" + strings.TrimSpace(line), cmd: cmd}
}

// PID is the process's id.
func (p *roleProcess) PID() int { return p.cmd.Process.Pid }

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
		return exitCode(err)
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
	*roleProcess
	pub *http.Client
}

// startFanoutLimit re-executes the test binary as the fan-out limit.
func startFanoutLimit(tb testing.TB) *fanoutLimit {
	tb.Helper()
	return &fanoutLimit{roleProcess: startRole(tb, fanoutRole), pub: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
}

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
