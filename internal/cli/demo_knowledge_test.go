package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"appkb/internal/cli/demo"
)

// serve --demo installs a handbook the demo chat answers from, and the
// answer says what the cited chunk says.
func TestDemoChatAnswersFromItsHandbook(t *testing.T) {
	dataDir := t.TempDir()
	srv := startServe(t, "--demo", "--data-dir", dataDir)
	key := regexp.MustCompile(`chat app key\s+(\S+)`).FindStringSubmatch(srv.out.String())
	if key == nil || !strings.Contains(srv.out.String(), demo.KnowledgeName) {
		t.Fatalf("demo banner lacks the chat key or the knowledge base:\n%s", srv.out.String())
	}
	body := fmt.Sprintf(`{"query":%q,"inputs":{},"user":"demo","response_mode":"blocking"}`, demo.BicycleQuestion)
	var answer string
	var cited []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		status, res := srv.call(t, "POST", "/v1/chat-messages", key[1], body)
		if status != 200 {
			t.Fatalf("chat: %d %v", status, res)
		}
		answer, _ = res["answer"].(string)
		cited = cited[:0]
		meta, _ := res["metadata"].(map[string]any)
		rr, _ := meta["retriever_resources"].([]any)
		for _, r := range rr {
			if c, ok := r.(map[string]any)["content"].(string); ok {
				cited = append(cited, c)
			}
		}
		// The handbook's three documents are indexed one after another;
		// until the one about bicycles is, the others are all there is to cite.
		if strings.Contains(strings.Join(cited, "\n"), "courtyard") {
			break
		}
	}
	if len(cited) == 0 {
		t.Fatalf("no citations after 30 s; last answer %q\n%s", answer, srv.log.String())
	}
	if !strings.Contains(answer, "Bicycles may be parked in the courtyard racks") {
		t.Errorf("answer %q does not say where bicycles go", answer)
	}
	found := false
	for _, c := range cited {
		found = found || strings.Contains(c, "courtyard")
	}
	if !found {
		t.Errorf("the answer's sentence is not among the citations %q", cited)
	}

	// A second start keeps the one knowledge base and the app's link to it.
	srv.stop()
	again := startServe(t, "--demo", "--data-dir", dataDir)
	ids := regexp.MustCompile(`knowledge base\s+(\S+)`).FindAllStringSubmatch(srv.out.String()+again.out.String(), -1)
	if len(ids) != 2 || ids[0][1] != ids[1][1] {
		t.Errorf("the second start made another knowledge base: %v", ids)
	}
}
