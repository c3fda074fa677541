// Command deployd is the GitOps read plane of a Kubernetes fleet.
//
//	deployd [serve]   serve the fleet of the configured cluster (default)
//	deployd demo      serve a simulated fleet with demo sign-in, on 127.0.0.1
//	deployd watch     follow a deployd server's fleet stream in the terminal
//	deployd app       list, get, sync, roll back and restart applications
//	deployd engine    the engine's status, a reconcile, suspend and resume
//	deployd login     sign in to a server in the browser; later commands use the tokens
//	deployd logout    forget a server's sign-in
//	deployd version   print the version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=… -X main.buildDate=…".
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		code := exitCode(err)
		if code == 0 {
			return // -h: the usage was printed
		}
		fmt.Fprintln(os.Stderr, "deployd:", err)
		stop()
		os.Exit(code)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stdout, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "watch":
		return runWatch(ctx, args, stdout, stderr)
	case "app":
		return runApp(ctx, args, stdout, stderr)
	case "engine":
		return runEngine(ctx, args, stdout, stderr)
	case "login":
		return runLogin(ctx, args, stdout, stderr)
	case "logout":
		return runLogout(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "deployd %s (commit %s, built %s)\n", version, commit, buildDate)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

const usage = `usage: deployd [command] [flags]

commands:
  serve     serve the fleet of the configured cluster (default)
  demo      serve a simulated fleet with demo sign-in on 127.0.0.1
  watch     follow a deployd server's fleet stream
  app       list, get, history, sync, rollback, restart applications
  engine    status, reconcile [--dry-run], suspend, resume the engine
  login     sign in to a deployd server (OIDC in the browser; tokens kept for later commands)
  logout    forget the sign-in kept for a server
  version   print the version
Run "deployd <command> -h" for a command's flags.
`
