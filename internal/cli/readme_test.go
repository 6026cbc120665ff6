package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README doc test. Every fenced shell block of README.md (sh, bash,
// shell, console) and every block without a language runs here, in the
// order the README shows them, or is marked as one that cannot run. The
// line right before a block may carry a marker:
//
//	<!-- doctest: skip (why it cannot run here) -->
//	<!-- doctest: NAME -->
//
// NAME picks an entry of readmeCases: where the block runs (against the
// demo server this test starts, or in a scratch directory whose bin/appkb
// is this test binary acting as the command line), what is put in place of
// the README's placeholders, and what its output must show. A shell block
// without a marker runs against the demo server and must exit 0 without
// an error body; an unlabelled block without a marker fails the test, so
// a new example never goes unchecked by accident.

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	line   int    // of the opening fence, from 1
	lang   string // what follows the opening fence
	marker string // the doctest marker before it, without the comment
	text   string
}

var doctestMarker = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)

// readmeBlocks splits a Markdown text into its fenced blocks.
func readmeBlocks(md string) []readmeBlock {
	var out []readmeBlock
	var cur *readmeBlock
	var body []string
	prev := "" // the last non-blank line outside a block
	for i, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			if m := doctestMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.marker = m[1]
			}
			body = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
			prev = line // a marker is for the one block after it
		case cur != nil:
			body = append(body, line)
		case strings.TrimSpace(line) != "":
			prev = line
		}
	}
	return out
}

// shBlocks returns the text of the fenced sh blocks of a Markdown text.
func shBlocks(md string) []string {
	var out []string
	for _, b := range readmeBlocks(md) {
		if b.lang == "sh" {
			out = append(out, b.text)
		}
	}
	return out
}

func isShellLang(lang string) bool {
	switch lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// readmeEnv is where a block runs.
type readmeEnv int

const (
	demoEnv    readmeEnv = iota // curl against the shared demo server
	scratchEnv                  // a fresh directory with bin/appkb, testdata and clients
	bannerEnv                   // not run: compared with the demo server's banner
)

// readmeCase says how one marked block runs and what it must print.
type readmeCase struct {
	env readmeEnv
	// prepare readies a scratch directory and gives the placeholders to
	// replace (in order) and extra environment variables; nil for none.
	prepare func(t *testing.T, dir string) (replace []string, env []string)
	// needs names programs the block runs; without one, it skips.
	needs []string
	// wants are texts the output must contain.
	wants []string
	// after checks what the block left running or written, before its
	// processes are stopped.
	after func(t *testing.T, dir, out string)
}

var readmeCases = map[string]readmeCase{
	"demo-banner": {env: bannerEnv},
	"first-calls": {env: demoEnv, wants: []string{
		`"answer":"courtyard "`,       // the streamed chat answer, from the handbook…
		`"document_name":"office.md"`, // …citing the document it comes from
		`"event":"message_end"`,
		`"mode":"completion"`, // the text generator answered
		`"name":"Travel"`,     // the knowledge base made
		`"name":"travel.txt"`, // the uploaded document
		`"records":[`,         // retrieve answered
		"openapi: ",           // the spec
	}},
	"openai": {env: demoEnv, wants: []string{
		`"object":"chat.completion"`,
		`"object":"chat.completion.chunk"`,
		`"usage":{`,
		"data: [DONE]",
		`"object":"list"`,
	}},
	"faults": {env: demoEnv, wants: []string{"503\n"}},
	"cli": {env: scratchEnv, prepare: prepareCLIBlock, wants: []string{
		`"app_id":"`, `"api_key":"app-`, `"api_key":"dataset-`,
		"Run \"appkb COMMAND --help\"", // --help
		`"revoked"`,
	}, after: func(t *testing.T, dir, out string) {
		for _, f := range []string{"my-app.yml", "backup.tar.gz"} {
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
				t.Errorf("the block left no %s: %v", f, err)
			}
		}
		exported, _ := os.ReadFile(filepath.Join(dir, "my-app.yml"))
		if !strings.Contains(string(exported), "README replaced") {
			t.Errorf("app export did not write the replaced app:\n%s", exported)
		}
		waitReady(t, readmeVar(t, dir, "addr"))
	}},
	"backup": {env: scratchEnv, prepare: prepareBackupBlock, wants: []string{`"files":`, `"restored"`}, after: func(t *testing.T, dir, out string) {
		if _, err := os.Stat(filepath.Join(dir, "restored", "appkb.db")); err != nil {
			t.Errorf("restore wrote no database: %v", err)
		}
	}},
	"mcp-agent": {env: scratchEnv, prepare: prepareMCPBlock, needs: []string{"node", "npm"}, wants: []string{
		`"event":"agent_thought"`,
		`"tool":"get-sum"`,
		"The sum of 2 and 3 is 5",
		`"tool":"current_time"`,
		`"event":"message_end"`,
	}},
}

func TestReadme(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl)")
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	blocks := readmeBlocks(string(raw))
	// One demo server for every block that calls it, started up front so
	// that it lives as long as this test.
	var demo *readmeDemo
	for _, b := range blocks {
		if c, ok := readmeCases[b.marker]; (ok && c.env != scratchEnv) || (b.marker == "" && isShellLang(b.lang)) {
			demo = startReadmeDemo(t)
			break
		}
	}
	for _, b := range blocks {
		if !isShellLang(b.lang) && b.lang != "" {
			continue // code of other languages: python, js, yaml, nginx
		}
		name := fmt.Sprintf("line %d", b.line)
		if b.marker != "" {
			name += " " + strings.Fields(b.marker)[0]
		}
		t.Run(name, func(t *testing.T) {
			if reason, ok := strings.CutPrefix(b.marker, "skip"); ok {
				if r := strings.TrimSpace(reason); !strings.HasPrefix(r, "(") || len(r) < 4 {
					t.Fatalf("README line %d: a skipped block says why: <!-- doctest: skip (reason) -->", b.line)
				}
				t.Skipf("marked in the README: %s", strings.TrimSpace(reason))
			}
			c, ok := readmeCases[b.marker]
			switch {
			case b.marker == "" && b.lang == "":
				t.Fatalf("README line %d: a block without a language and without a doctest marker; mark it (<!-- doctest: NAME --> or <!-- doctest: skip (reason) -->)", b.line)
			case b.marker == "":
				c = readmeCase{env: demoEnv}
			case !ok:
				t.Fatalf("README line %d: unknown doctest marker %q", b.line, b.marker)
			}
			used[b.marker] = true
			for _, prog := range c.needs {
				if _, err := exec.LookPath(prog); err != nil {
					t.Skipf("%s is not installed", prog)
				}
			}
			if c.env != scratchEnv && demo == nil {
				t.Fatal("no demo server was started for this block")
			}
			switch c.env {
			case bannerEnv:
				checkBanner(t, b.text, demo)
			case demoEnv:
				out := runReadmeScript(t, t.TempDir(), demo.substitute(t, b.text), []string{"APP_KEY=" + demo.chatKey}, nil)
				checkReadmeOutput(t, out, c.wants)
			case scratchEnv:
				dir := readmeScratch(t)
				replace, env := c.prepare(t, dir)
				script := strings.NewReplacer(replace...).Replace(b.text)
				after := func(out string) {}
				if c.after != nil {
					after = func(out string) { c.after(t, dir, out) }
				}
				out := runReadmeScript(t, dir, script, env, after)
				checkReadmeOutput(t, out, c.wants)
			}
		})
	}
	for name := range readmeCases {
		if !used[name] {
			t.Errorf("no README block is marked <!-- doctest: %s -->", name)
		}
	}
}

// readmeDemo is the demo server the README's curl examples call.
type readmeDemo struct {
	srv                                 *liveServer
	banner                              string
	chatKey, completionKey, kbKey, kbID string
}

func startReadmeDemo(t *testing.T) *readmeDemo {
	t.Helper()
	// --faults for the README's injected-503 example; no python sandboxes
	// started ahead, as no block runs a code node.
	srv := startServe(t, "--demo", "--faults", "--code-warm", "0", "--data-dir", t.TempDir())
	banner := srv.out.String()
	field := func(label string) string {
		m := regexp.MustCompile(label + `\s+(\S+)`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("demo banner lacks %q:\n%s", label, banner)
		}
		return m[1]
	}
	d := &readmeDemo{srv: srv, banner: banner, chatKey: field("chat app key"), completionKey: field("completion app key"),
		kbKey: field("knowledge key"), kbID: field("knowledge base")}
	// The handbook is indexed in the background; a person reads the banner
	// first, the test waits for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, docs := srv.call(t, "GET", "/v1/datasets/"+d.kbID+"/documents", d.kbKey, "")
		if n := strings.Count(fmt.Sprint(docs["data"]), "indexing_status:completed"); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo handbook was not indexed in 30 s: %v", docs)
		}
	}
	return d
}

// substitute puts the demo server's address, keys and knowledge base in
// place of the README's placeholders.
func (d *readmeDemo) substitute(t *testing.T, block string) string {
	t.Helper()
	script := strings.NewReplacer(
		"http://127.0.0.1:5001", d.srv.base,
		"app-Xw3…", d.chatKey,
		"app-P0q…", d.completionKey,
		"dataset-Lq9…", d.kbKey,
		"DATASET_ID", d.kbID,
	).Replace(block)
	if strings.Contains(script, "…") {
		t.Fatalf("a placeholder is left in the script:\n%s", script)
	}
	return script
}

// checkBanner compares the README's picture of the demo banner with the
// one the server printed: every line the README shows is there, with a
// value of the same kind (an example key stands for any key of its kind).
func checkBanner(t *testing.T, block string, d *readmeDemo) {
	t.Helper()
	addr := strings.TrimPrefix(d.srv.base, "http://")
	printed := strings.Split(d.banner, "\n")
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		var pat strings.Builder
		pat.WriteString(`^\s*`)
		for i, tok := range strings.Fields(strings.ReplaceAll(line, "127.0.0.1:5001", addr)) {
			if i > 0 {
				pat.WriteString(`\s+`)
			}
			if head, _, ok := strings.Cut(tok, "…"); ok {
				// app-Xw3… stands for app-<anything>; 6f1c… for any id.
				keep := head[:strings.LastIndex(head, "-")+1]
				pat.WriteString(regexp.QuoteMeta(keep) + `[^\s(]+`)
				continue
			}
			pat.WriteString(regexp.QuoteMeta(tok))
		}
		re := regexp.MustCompile(pat.String() + `\s*$`)
		found := false
		for _, p := range printed {
			found = found || re.MatchString(p)
		}
		if !found {
			t.Errorf("the README shows the banner line %q, the server printed:\n%s", line, d.banner)
		}
	}
}

func checkReadmeOutput(t *testing.T, out string, wants []string) {
	t.Helper()
	if m := regexp.MustCompile(`"status":\s*[45]\d\d`).FindString(out); m != "" {
		t.Errorf("a call answered with an error (%s):\n%s", m, out)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// runReadmeScript runs a block with bash -e in dir, in a process group of
// its own that is ended (with whatever the block left in the background,
// servers included) once after has looked at it. It fails the test when
// the block exits non-zero or takes over three minutes.
func runReadmeScript(t *testing.T, dir, script string, env []string, after func(out string)) string {
	t.Helper()
	// A file, not a pipe: background processes keep their copy of the
	// output open, and waiting for a pipe would wait for them.
	outFile, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(),
		// serve keeps no python sandboxes started ahead here: the blocks
		// run no code nodes, and the test machine has few cores.
		"APPKB_CODE_WARM=0",
		"PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH")),
		env...)
	cmd.Stdout, cmd.Stderr = outFile, outFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	stopGroup := func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		for range 100 { // up to 10 s for servers to shut down
			if syscall.Kill(-pgid, 0) != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	defer stopGroup()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		stopGroup()
		err = fmt.Errorf("still running after 3 minutes")
		<-done
	}
	raw, _ := os.ReadFile(outFile.Name())
	out := string(raw)
	if err != nil {
		t.Fatalf("the README's block failed: %v\n%s\n--- script\n%s", err, out, script)
	}
	if after != nil {
		after(out)
	}
	return out
}

// readmeScratch makes a directory laid out like the repository's root for
// the blocks that run commands: bin/appkb runs this test binary as the
// command line, and testdata/ and clients/ are the repository's.
func readmeScratch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../..")
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nAPPKB_README_AS_CLI=%q exec %q \"$@\"\n", spec, exe)
	if err := os.WriteFile(filepath.Join(dir, "bin", "appkb"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "testdata"), filepath.Join(dir, "testdata")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The scratch directories' bin/appkb: with APPKB_README_AS_CLI naming
// openapi.yaml, this test binary is the appkb command line. It runs from
// an init function, ahead of the package's other ones (spec_test.go reads
// openapi.yaml relative to the package directory, which a block's working
// directory is not).
func init() {
	spec := os.Getenv("APPKB_README_AS_CLI")
	if spec == "" {
		return
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "appkb (README test):", err)
		os.Exit(1)
	}
	Main(b)
	os.Exit(0)
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
	}
	t.Errorf("no server became ready on %s", addr)
}

// readmeVar reads a value a prepare function left in the scratch directory.
func readmeVar(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".readme-"+name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeReadmeVar(t *testing.T, dir, name, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ".readme-"+name), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}
