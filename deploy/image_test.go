package deploy_test

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const buildScript = "hack/build.sh"

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, …
	args string
}

// stage is one FROM … [AS name] of a Dockerfile.
type stage struct {
	base, name string
	body       []instruction
}

// parseDockerfile splits a Dockerfile into its stages. It knows what this
// repository's Dockerfile uses: comments, line continuations, FROM with
// flags and AS.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ins []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		ins = append(ins, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", path)
	}
	var stages []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			var s stage
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) == 0 {
				t.Fatalf("%s: FROM without an image", path)
			}
			s.base = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s: %s before the first FROM", path, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if len(stages) < 2 {
		t.Fatalf("%s has %d stages, want a build stage and a runtime stage", path, len(stages))
	}
	return stages
}

func jsonArgs(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.args), &v); err != nil {
		t.Errorf("%s %s: want the JSON (exec) form: %v", in.cmd, in.args, err)
	}
	return v
}

var buildScriptRun = regexp.MustCompile(`(?:^|[\s/])hack/build\.sh\s+(\S+)`)

// TestDockerfileUsesTheBuildScript: the image's binary comes from a build
// stage that runs hack/build.sh, the script make build runs; the runtime
// stage is a small non-root image that runs "deployd serve" on 8080.
func TestDockerfileUsesTheBuildScript(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.base, "gcr.io/distroless/static") && final.base != "scratch" {
		t.Errorf("runtime image %s, want distroless/static or scratch", final.base)
	}

	var from, src string
	var user string
	var exposed, entry, cmd bool
	for _, in := range final.body {
		switch in.cmd {
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[2] == "/deployd" {
				from, src = strings.TrimPrefix(f[0], "--from="), f[1]
			}
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = exposed || slices.Contains(strings.Fields(in.args), "8080") || slices.Contains(strings.Fields(in.args), "8080/tcp")
		case "ENTRYPOINT":
			entry = slices.Equal(jsonArgs(t, in), []string{"/deployd"})
		case "CMD":
			cmd = slices.Equal(jsonArgs(t, in), []string{"serve"})
		case "RUN":
			t.Errorf("the runtime stage runs %q: it has no shell, everything is built before", in.args)
		}
	}
	if from == "" {
		t.Fatal("the runtime stage copies no /deployd from a build stage")
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); (err == nil && n == 0) || (err != nil && uid != "nonroot") {
		t.Errorf("USER %q, want a non-root user (65532 or nonroot)", user)
	}
	if !exposed || !entry || !cmd {
		t.Errorf("runtime stage: EXPOSE 8080 %v, ENTRYPOINT [\"/deployd\"] %v, CMD [\"serve\"] %v; want all", exposed, entry, cmd)
	}

	idx := slices.IndexFunc(stages, func(s stage) bool { return s.name == from })
	if idx < 0 {
		t.Fatalf("COPY --from=%s names no stage", from)
	}
	build := stages[idx]
	var built bool
	for _, in := range build.body {
		if in.cmd != "RUN" {
			continue
		}
		if m := buildScriptRun.FindStringSubmatch(in.args); m != nil {
			built = true
			if m[1] != src {
				t.Errorf("stage %s builds %s with %s but the runtime stage copies %s", from, m[1], buildScript, src)
			}
		}
		if strings.Contains(in.args, "go build") {
			t.Errorf("stage %s runs go build itself (%q): only %s may, so the image and make build agree", from, in.args, buildScript)
		}
	}
	if !built {
		t.Errorf("stage %s does not run %s", from, buildScript)
	}

	// The build stage's Go is at least what go.mod asks for: GOTOOLCHAIN=local
	// never downloads another.
	goMod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)\s*$`).FindSubmatch(goMod)
	have := regexp.MustCompile(`^golang:(\d+\.\d+(?:\.\d+)?)`).FindStringSubmatch(build.base)
	if want == nil || have == nil {
		t.Errorf("build stage image %s or go.mod's go line is not a plain version", build.base)
	} else if compareVersions(have[1], string(want[1])) < 0 {
		t.Errorf("build stage image %s is older than go.mod's go %s", build.base, want[1])
	}
}

// compareVersions compares dotted numeric versions ("1.26" < "1.26.8").
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// TestMakeBuildUsesTheBuildScript: make build runs the same script.
func TestMakeBuildUsesTheBuildScript(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe []string
	in := false
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "build:"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, strings.TrimSpace(line))
		case in:
			in = false
		}
	}
	if len(recipe) == 0 {
		t.Fatal("the Makefile has no build target")
	}
	var runs bool
	for _, l := range recipe {
		runs = runs || buildScriptRun.MatchString(l)
		if strings.Contains(l, "go build") || strings.Contains(l, "$(GO) build") {
			t.Errorf("make build runs %q itself: only %s may", l, buildScript)
		}
	}
	if !runs {
		t.Errorf("make build runs %q, want %s", recipe, buildScript)
	}
}

// TestBuildScript runs hack/build.sh as the Dockerfile does and checks the
// binary: it runs "version" with the stamped values, it is static (no
// program interpreter, no dynamic section), has neither symbols nor DWARF,
// and was built with CGO_ENABLED=0 and -trimpath.
func TestBuildScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds deployd; skipped in -short")
	}
	out := filepath.Join(t.TempDir(), "deployd")
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(repoRoot, buildScript), out)
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-test", "COMMIT=0123abc", "BUILD_DATE=2026-01-02T03:04:05Z")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", buildScript, err, b)
	}

	got, err := exec.CommandContext(t.Context(), out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("deployd version: %v\n%s", err, got)
	}
	if want := "deployd v0.0.0-test (commit 0123abc, built 2026-01-02T03:04:05Z)\n"; string(got) != want {
		t.Errorf("deployd version printed %q, want %q", got, want)
	}

	info, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q, want 0 and true", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	if info.Path != "github.com/hanzoai/deploy/cmd/deployd" {
		t.Errorf("built %s, want github.com/hanzoai/deploy/cmd/deployd", info.Path)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	// -trimpath keeps -ldflags out of the build info; -s and -w show in
	// what the linker left out, -X in the version printed above.
	if f.Section(".symtab") != nil {
		t.Error("the binary has a symbol table: not linked with -s")
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("the binary has DWARF (%s): not linked with -w", s.Name)
			break
		}
	}
}

// TestDockerignoreKeepsTheBuildInputs: the build context keeps every file
// hack/build.sh compiles (the Go files and embedded files of every package
// of the module that cmd/deployd needs, go.mod, go.sum, the script) and
// leaves out the repository's history and local build outputs.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	patterns := dockerignore(t)
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-json", "./cmd/deployd")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root := mustAbs(t, repoRoot)
	need := []string{"go.mod", "go.sum", buildScript}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir        string
			Standard   bool
			Module     *struct{ Path string }
			GoFiles    []string
			EmbedFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Standard || p.Module == nil || p.Module.Path != "github.com/hanzoai/deploy" {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(slices.Clone(p.GoFiles), p.EmbedFiles...) {
			need = append(need, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(need) < 10 {
		t.Fatalf("go list found only %v", need)
	}
	for _, f := range need {
		if p := ignoredBy(patterns, f); p != "" {
			t.Errorf(".dockerignore pattern %q leaves out %s, which the build needs", p, f)
		}
	}
	for _, f := range []string{".git/HEAD", "bin/deployd", "deployd", "stream/stream.test", "deploy/compose/dex.yaml"} {
		if ignoredBy(patterns, f) == "" {
			t.Errorf(".dockerignore lets %s into the build context", f)
		}
	}
}

// dockerignore reads the patterns of .dockerignore.
func dockerignore(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, line)
	}
	return ps
}

// ignoredBy returns the pattern that leaves path out of the build context,
// or "". The semantics are Docker's: patterns are matched against the path
// and every parent folder, in order, "!" re-includes, "**" spans folders.
func ignoredBy(patterns []string, path string) string {
	var hit string
	for _, raw := range patterns {
		p, negate := strings.CutPrefix(raw, "!")
		re := patternRegexp(strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/"))
		matched := false
		for q := path; q != "." && q != "/" && q != ""; q = filepath.ToSlash(filepath.Dir(q)) {
			if re.MatchString(q) {
				matched = true
				break
			}
		}
		if matched {
			hit = raw
			if negate {
				hit = ""
			}
		}
	}
	return hit
}

func patternRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
