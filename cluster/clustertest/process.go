package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one real binary the harness runs: it lives in its own process
// group (so a stop reaches anything it forked), dies with the test binary
// (Pdeathsig), and writes stdout and stderr to one log file, appended across
// restarts.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current run has exited
}

func newProcess(name, bin, logPath string, args []string) *process {
	return &process{name: name, bin: bin, args: args, logPath: logPath}
}

// start runs the binary once more with the same arguments.
func (p *process) start() error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	fmt.Fprintf(log, "\n=== clustertest: start %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// current is the latest run and its done channel (nil before any start).
func (p *process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// exited reports whether the current run has ended.
func (p *process) exited() bool {
	_, done := p.current()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// stop sends sig to the process group and waits up to grace for the exit;
// then it kills the group. It returns once the process has been reaped.
// The group is only signalled while its leader is alive (and not yet
// reaped), so its id cannot have been reused by an unrelated process.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	cmd, done := p.current()
	if cmd == nil || p.exited() {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

// pid is the process id of the current run (0 before any start).
func (p *process) pid() int {
	cmd, _ := p.current()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

// exitedWithBindError reports whether the current run ended because its
// port was taken (a race with another process between picking and binding).
func (p *process) exitedWithBindError() bool {
	if !p.exited() {
		return false
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return false
	}
	return bytes.Contains(lastRun(b), []byte("address already in use"))
}

// lastRun is the part of a log written by the latest run.
func lastRun(b []byte) []byte {
	if i := bytes.LastIndex(b, []byte("=== clustertest: start ")); i >= 0 {
		return b[i:]
	}
	return b
}

// tail returns the last n lines of the log.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errExited is returned by waits when the process ended before it was ready.
var errExited = errors.New("process exited")

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are free
// when picked; a process may still lose one to a race before it binds, which
// the callers detect and retry.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
