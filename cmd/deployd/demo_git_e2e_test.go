package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hanzoai/deploy/demo"
	"github.com/hanzoai/deploy/fleet"
)

// gitCmd runs the system git in dir and answers its output.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Newcomer", "GIT_AUTHOR_EMAIL=newcomer@example.com",
		"GIT_COMMITTER_NAME=Newcomer", "GIT_COMMITTER_EMAIL=newcomer@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestDemoGitLoop: the demo serves a manifest repository its engine drives
// the simulated fleet from. A newcomer clones the URL it prints, changes a
// tag and pushes; the App shows the new tag in the list and the stream
// within 10 s, and the drift board declares and runs it once rolled out;
// a rollback through the API is a commit authored by the signed-in demo
// user; the engine's panel, a dry-run preview and the history from git
// answer; the repository is gone when the demo stops.
func TestDemoGitLoop(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		missingTool(t, "git is not installed", "apt-get install git")
	}
	var repoDir string
	t.Cleanup(func() { // runs after the demo's own clean-up
		if _, err := os.Stat(repoDir); !os.IsNotExist(err) {
			t.Errorf("the demo's repository %s is still there after it stopped (%v)", repoDir, err)
		}
	})
	d := runningDemo(t, func(o *demoOptions) { o.GitListen = "127.0.0.1:0" })
	if d.repo == nil {
		t.Fatalf("the demo serves no repository: %s", d.gitOff)
	}
	repoDir = d.repo.Dir
	var banner bytes.Buffer
	d.banner(&banner, 30)
	m := regexp.MustCompile(`git clone (http://127\.0\.0\.1:\d+/\S+)`).FindStringSubmatch(banner.String())
	if m == nil {
		t.Fatalf("the start-up lines print no clone URL:\n%s", banner.String())
	}

	ada := signIn(t, d, demoUser(t, d, "ada"))
	_, rv := listNames(t, d, ada)
	f := follow(t, &http.Client{Jar: ada.Jar}, d.URL+"/v1/deploy/stream/applications?resourceVersion="+rv, "")

	work := t.TempDir()
	gitCmd(t, work, "clone", "-q", m[1], "fleet")
	clone := filepath.Join(work, "fleet")
	app, _, ok := d.env.Sim.App("hanzo", "billing")
	if !ok || app.Kind != fleet.KindApp {
		t.Fatal("no hanzo/billing App in the demo")
	}
	file := filepath.Join(clone, "apps", "hanzo", "billing.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the repository does not declare hanzo/billing where the README says: %v", err)
	}
	const newTag = "v9.1.0"
	changed := strings.Replace(string(b), "tag: "+app.Tag, "tag: "+newTag, 1)
	if changed == string(b) {
		t.Fatalf("apps/hanzo/billing.yaml does not hold tag %s:\n%s", app.Tag, b)
	}
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, clone, "commit", "-qam", "billing "+newTag)
	gitCmd(t, clone, "push", "-q", "origin", "main")
	pushed := time.Now()

	// The engine runs on the push and applies the App; the simulated
	// operator renders the new image as the simulator steps (every 2 s at
	// the demo's pace; this test steps it itself, as often).
	image := app.Repository + ":" + newTag
	listed, streamed := false, false
	lastStep := time.Now()
	for !listed || !streamed {
		if time.Since(pushed) > 10*time.Second {
			t.Fatalf("10 s after the push: listed %v, streamed %v (events %+v)", listed, streamed, f.of("hanzo", "billing"))
		}
		if time.Since(lastStep) >= demo.DefaultPace {
			if err := d.env.Sim.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
			lastStep = time.Now()
		}
		if !listed {
			listed = slices.Contains(listedImages(t, d, ada, "hanzo", "billing"), image)
		}
		for _, e := range f.of("hanzo", "billing") {
			streamed = streamed || slices.Contains(e.Images, image)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("hanzo/billing at %s in the list and the stream %v after the push", newTag, time.Since(pushed).Round(time.Millisecond))
	stepUntil(t, d, 15, "billing rolled out to "+newTag, func() bool {
		ev := f.of("hanzo", "billing")
		last := ev[len(ev)-1]
		return slices.Contains(last.Images, image) && last.Health == "Healthy" && last.Sync == "Synced"
	}, func() string { return fmt.Sprintf("%+v", f.of("hanzo", "billing")) })

	get := func(path string, out any) {
		t.Helper()
		resp, err := ada.Get(d.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(out) != nil {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	// The drift board names the declared and the running tag.
	var board struct {
		Apps []struct {
			App, Namespace, DeclaredTag, RunningTag string
		}
	}
	get("/v1/paas/apps", &board)
	found := false
	for _, r := range board.Apps {
		if r.Namespace == "hanzo" && r.App == "billing" {
			found = r.DeclaredTag == newTag && r.RunningTag == newTag
		}
	}
	if !found {
		t.Fatalf("the board's billing row is not at %s: %+v", newTag, board.Apps)
	}

	// A rollback through the API is a commit by the signed-in demo user.
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/deploy/applications/billing/rollback?appNamespace=hanzo",
		strings.NewReader(`{"tag":"`+app.Tag+`"}`))
	req.Header.Set("Origin", d.URL)
	resp, err := ada.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rollback: %d %s", resp.StatusCode, body)
	}
	gitCmd(t, clone, "pull", "-q", "--ff-only")
	author := gitCmd(t, clone, "log", "-1", "--format=%an <%ae>", "--", "apps/hanzo/billing.yaml")
	if u := demoUser(t, d, "ada"); author != u.Name+" <"+u.Email+">" {
		t.Fatalf("the rollback's commit is authored by %q, want the signed-in %s <%s>", author, u.Name, u.Email)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "tag: "+app.Tag) {
		t.Fatalf("after the rollback the file declares:\n%s", b)
	}
	head := gitCmd(t, clone, "rev-parse", "HEAD")

	// The engine's panel, a dry-run preview and the App's history from git.
	var panel struct {
		Engine struct {
			Enabled bool
			Source  struct{ Repo string }
		}
	}
	get("/v1/deploy/gitops", &panel)
	status := panel.Engine
	if !status.Enabled || status.Source.Repo != m[1] {
		t.Fatalf("the engine panel: %+v, want enabled reading %s", status, m[1])
	}
	req, _ = http.NewRequest(http.MethodPost, d.URL+"/v1/deploy/reconcile?dryRun=true", nil)
	req.Header.Set("Origin", d.URL)
	resp, err = ada.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var preview struct {
		Revision string
		Declared int
		Results  []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&preview); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dry run: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	dry := len(preview.Results) > 0
	for _, r := range preview.Results {
		dry = dry && strings.HasPrefix(r.Message, "dry run")
	}
	if apps := len(d.env.Sim.Apps()); !dry || preview.Revision != head || preview.Declared == 0 || preview.Declared > apps {
		t.Fatalf("dry run: %+v, want a preview of %s declaring the demo's Apps (%d entries)", preview, head, apps)
	}
	var billing struct {
		Status struct {
			History []struct {
				Revision    string
				InitiatedBy struct{ Username string }
			}
		}
	}
	get("/api/v1/applications/billing?appNamespace=hanzo", &billing)
	var by []string
	for _, h := range billing.Status.History {
		by = append(by, h.Revision+" by "+h.InitiatedBy.Username)
	}
	if !slices.Contains(by, newTag+" by Newcomer <newcomer@example.com>") {
		t.Fatalf("billing's history from git: %v, want %s by the newcomer who pushed it", by, newTag)
	}
	stepUntil(t, d, 15, "billing rolled back to "+app.Tag+" at "+head, func() bool {
		ev := f.of("hanzo", "billing")
		last := ev[len(ev)-1]
		return last.Revision == head && last.Health == "Healthy" && last.Sync == "Synced"
	}, func() string { return fmt.Sprintf("%+v", f.of("hanzo", "billing")) })
}

// listedImages is the App's status.summary.images in the list.
func listedImages(t *testing.T, d *demoServer, c *http.Client, namespace, name string) []string {
	t.Helper()
	resp, err := c.Get(d.URL + "/v1/deploy/applications?fields=items.metadata.name,items.metadata.namespace,items.status.summary.images")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
			Status   struct{ Summary struct{ Images []string } }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	for _, it := range list.Items {
		if it.Metadata.Namespace == namespace && it.Metadata.Name == name {
			return it.Status.Summary.Images
		}
	}
	t.Fatalf("%s/%s is not in the list", namespace, name)
	return nil
}
