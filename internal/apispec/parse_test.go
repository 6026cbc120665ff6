package apispec

import (
	"bytes"
	"encoding/json"
	"testing"

	"appkb/gen"
)

// TestLoadSpecMatchesGenerated checks that the parallel parse gives the
// document the generated loader gives, field for field (as JSON), and
// that references are resolved in it as they are there.
func TestLoadSpecMatchesGenerated(t *testing.T) {
	want, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotJSON, wantJSON) {
		i := 0
		for i < len(gotJSON) && i < len(wantJSON) && gotJSON[i] == wantJSON[i] {
			i++
		}
		lo := max(0, i-200)
		t.Fatalf("the documents differ at byte %d:\ngot  …%s\nwant …%s", i, gotJSON[lo:min(len(gotJSON), i+200)], wantJSON[lo:min(len(wantJSON), i+200)])
	}
	if len(wantJSON) < 100_000 {
		t.Fatalf("the compared document is only %d bytes", len(wantJSON))
	}
	// Resolved: every reference of a request body points at its schema.
	resolved, refs := 0, 0
	for _, item := range got.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for _, mt := range op.RequestBody.Value.Content {
				if mt.Schema != nil && mt.Schema.Ref != "" {
					refs++
					if mt.Schema.Value != nil {
						resolved++
					}
				}
			}
		}
	}
	if refs == 0 || resolved != refs {
		t.Fatalf("%d of %d request-body references resolved", resolved, refs)
	}
}

func BenchmarkLoadSpec(b *testing.B) {
	for _, bc := range []struct {
		name string
		load func() error
	}{
		{"generated", func() error { _, err := gen.GetSpec(); return err }},
		{"parallel", func() error { _, err := loadSpec(); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				if err := bc.load(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
