package cli

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shBlocks returns the fenced sh blocks of a Markdown text.
func shBlocks(md string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}

// The README's first calls (chat, completion, knowledge: create, upload,
// list, retrieve) run as written against a demo server this test starts,
// with the demo's keys, address and knowledge base put in place of the
// README's placeholders.
func TestReadmeFirstCallsRun(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl)")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range shBlocks(string(readme)) {
		if strings.Contains(b, "create-by-file") && strings.Contains(b, "chat-messages") {
			block = b
			break
		}
	}
	if block == "" {
		t.Fatal("README has no sh block with the first chat and knowledge calls")
	}
	srv := startServe(t, "--demo", "--data-dir", t.TempDir())
	banner := srv.out.String()
	field := func(label string) string {
		m := regexp.MustCompile(label + `\s+(\S+)`).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("demo banner lacks %q:\n%s", label, banner)
		}
		return m[1]
	}
	// The handbook is indexed in the background; a person reads the banner
	// first, the test waits for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, docs := srv.call(t, "GET", "/v1/datasets/"+field("knowledge base")+"/documents", field("knowledge key"), "")
		if n := strings.Count(fmt.Sprint(docs["data"]), "indexing_status:completed"); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo handbook was not indexed in 30 s: %v", docs)
		}
	}
	script := strings.NewReplacer(
		"http://127.0.0.1:5001", srv.base,
		"app-Xw3…", field("chat app key"),
		"app-P0q…", field("completion app key"),
		"dataset-Lq9…", field("knowledge key"),
		"DATASET_ID", field("knowledge base"),
	).Replace(block)
	if strings.Contains(script, "…") {
		t.Fatalf("a placeholder is left in the script:\n%s", script)
	}
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's block failed: %v\n%s\n--- script\n%s", err, out, script)
	}
	if strings.Contains(string(out), `"status":4`) || strings.Contains(string(out), `"status":5`) {
		t.Errorf("a call answered with an error:\n%s", out)
	}
	for _, want := range []string{
		`"answer":"courtyard "`,       // the streamed chat answer, from the handbook…
		`"document_name":"office.md"`, // …citing the document it comes from
		`"event":"message_end"`,
		`"mode":"completion"`, // the text generator answered
		`"name":"Travel"`,     // the knowledge base made
		`"name":"travel.txt"`, // the uploaded document
		`"records":[`,         // retrieve answered
		"openapi: ",           // the spec
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
