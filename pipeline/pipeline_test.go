package pipeline

import (
	"testing"

	"appkb/apperr"
)

func TestCheck(t *testing.T) {
	one := []map[string]any{{"reference": "f"}}
	tests := []struct {
		name     string
		req      RunRequest
		wantNode string
		wantCode string
	}{
		{"a local file run", RunRequest{DatasourceType: TypeLocalFile, StartNodeID: NodeLocalFile, Sources: one}, NodeLocalFile, ""},
		{"a web page run", RunRequest{DatasourceType: TypeWebsiteCrawl, StartNodeID: NodeWebPage, Sources: one}, NodeWebPage, ""},
		{"unknown node", RunRequest{DatasourceType: TypeLocalFile, StartNodeID: "nope", Sources: one}, "", apperr.CodeInvalidParam},
		{"node of another type", RunRequest{DatasourceType: TypeLocalFile, StartNodeID: NodeWebPage, Sources: one}, "", apperr.CodeInvalidParam},
		{"online documents", RunRequest{DatasourceType: TypeOnlineDocument, StartNodeID: NodeLocalFile, Sources: one}, "", apperr.CodeInvalidParam},
		{"no sources", RunRequest{DatasourceType: TypeLocalFile, StartNodeID: NodeLocalFile}, "", apperr.CodeInvalidParam},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node, err := Check(tc.req)
			if tc.wantCode != "" {
				if !apperr.Is(err, tc.wantCode) {
					t.Fatalf("error %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil || node.NodeID != tc.wantNode {
				t.Fatalf("node %q, error %v", node.NodeID, err)
			}
		})
	}
}

func TestPageNames(t *testing.T) {
	tests := []struct{ html, title, name string }{
		{`<html><head><TITLE lang="en"> Parking
			guide </TITLE></head></html>`, "Parking guide", "Parking guide"},
		{`<p>no title</p>`, "", "page"},
		{`<title>a/b\c</title>`, `a/b\c`, "a-b-c"},
	}
	for _, tc := range tests {
		if got := htmlTitle(tc.html); got != tc.title {
			t.Errorf("htmlTitle(%q) = %q, want %q", tc.html, got, tc.title)
		}
		if got := safeName(htmlTitle(tc.html)); got != tc.name {
			t.Errorf("safeName = %q, want %q", got, tc.name)
		}
	}
}
