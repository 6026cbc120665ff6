package documents_test

import (
	"archive/zip"
	"bytes"
	"context"
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
)

// A job whose runs were cut short by the process dying is quarantined when
// it would start once more: status error with the reason kept, no job left.
func TestInterruptedTwiceIsQuarantined(t *testing.T) {
	f := newFixture(t, datasets.TechniqueEconomy)
	ctx := context.Background()
	cases := []struct {
		attempts int
		want     string
	}{
		{1, "completed"}, // one crash: tried again
		{2, "error"},     // two crashes: quarantined
		{5, "error"},
	}
	batches := make([]string, len(cases))
	for i, c := range cases {
		out, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "doc", sample, documents.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		batches[i] = out.Batch
		if err := f.db.Exec(`UPDATE indexing_jobs SET state = 'running', attempts = ? WHERE document_id = ?`, c.attempts, out.Document.ID).Error; err != nil {
			t.Fatal(err)
		}
	}
	f.start(t)
	for i, c := range cases {
		st := f.wait(t, batches[i])[0]
		if st.IndexingStatus != c.want {
			t.Fatalf("attempts %d: status %s, want %s", c.attempts, st.IndexingStatus, c.want)
		}
		if c.want == "error" && (st.Error == nil || !strings.Contains(*st.Error, "interrupted")) {
			t.Fatalf("attempts %d: reason %v", c.attempts, st.Error)
		}
	}
	if n := f.count(t, `SELECT COUNT(*) FROM indexing_jobs`); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// The 2 KB docx with 100,000 nested paragraphs ends as error with a reason,
// and the worker goes on with the next document.
func TestHostileDocumentEndsInError(t *testing.T) {
	f := newFixture(t, datasets.TechniqueEconomy)
	f.start(t)
	ctx := context.Background()
	var body strings.Builder
	body.WriteString(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>`)
	body.WriteString(strings.Repeat("<w:p>", 100_000))
	body.WriteString(strings.Repeat("</w:p>", 100_000))
	body.WriteString(`</w:body></w:document>`)
	data := zipOf(t, map[string]string{"word/document.xml": body.String()})
	out, err := f.svc.CreateFromFile(ctx, f.actor, f.dataset, documents.Upload{Name: "bomb.docx", Body: bytes.NewReader(data)}, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	st := f.wait(t, out.Batch)[0]
	if st.IndexingStatus != "error" || st.Error == nil || !strings.Contains(*st.Error, "nests more than") {
		t.Fatalf("status = %s, error = %v", st.IndexingStatus, st.Error)
	}
	next, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "after", sample, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if st := f.wait(t, next.Batch)[0]; st.IndexingStatus != "completed" {
		t.Fatalf("next document: %s", st.IndexingStatus)
	}
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
