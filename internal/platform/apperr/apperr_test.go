package apperr

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestFailTakesTheStatusOfItsCode(t *testing.T) {
	cause := errors.New("disk gone")
	tests := []struct {
		name       string
		err        *Error
		wantStatus int
		wantCode   string
		wantMsg    string
		wantCause  bool
	}{
		{"invalid param", InvalidParam("bad %s", "limit"), 400, CodeInvalidParam, "bad limit", false},
		{"not found", NotFound("no app %d", 7), 404, CodeNotFound, "no app 7", false},
		{"unauthorized", Unauthorized("no key"), 401, CodeUnauthorized, "no key", false},
		{"forbidden", Forbidden("not yours"), 403, CodeForbidden, "not yours", false},
		{"not implemented", NotImplemented("Dancing"), 501, CodeNotImplemented, "Dancing is not implemented yet", false},
		{"internal masks its cause", Internal(cause), 500, CodeInternal, "The server encountered an internal error.", true},
		{"duplicate name", Fail(CodeDatasetNameDuplicate, "taken"), 409, CodeDatasetNameDuplicate, "taken", false},
		{"form expired", Fail(CodeFormExpired, "late"), 412, CodeFormExpired, "late", false},
		{"file too large", Fail(CodeFileTooLarge, "big"), 413, CodeFileTooLarge, "big", false},
		{"audio type", Fail(CodeUnsupportedAudioType, "ogg?"), 415, CodeUnsupportedAudioType, "ogg?", false},
		{"model failure", FailWith(cause, CodeProviderQuotaExceeded, "quota"), 400, CodeProviderQuotaExceeded, "quota", true},
		{"unknown code", Fail("no_such_code", "x"), 500, "no_such_code", "x", false},
		{"explicit status", New(http.StatusTooManyRequests, "too_many_requests", "slow down"), 429, "too_many_requests", "slow down", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.err
			if e.Status != tc.wantStatus || e.Code != tc.wantCode || e.Message != tc.wantMsg {
				t.Fatalf("got %d %s %q, want %d %s %q", e.Status, e.Code, e.Message, tc.wantStatus, tc.wantCode, tc.wantMsg)
			}
			if got := errors.Is(e, cause); got != tc.wantCause {
				t.Fatalf("errors.Is(cause) = %v, want %v", got, tc.wantCause)
			}
		})
	}
}

func TestClientFault(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"client error", InvalidParam("x"), true},
		{"wrapped client error", fmt.Errorf("ctx: %w", Fail(CodeFileNotFound, "x")), true},
		{"internal", Internal(errors.New("x")), false},
		{"foreign", errors.New("x"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := ClientFault(tc.err); got != tc.want {
			t.Errorf("%s: ClientFault = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEveryCodeHasAStatus reads the code constants this package declares
// and asks for a row of the status table for each, so that a new code
// cannot answer 500 by accident.
func TestEveryCodeHasAStatus(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				code, _ := strconv.Unquote(lit.Value)
				seen++
				if _, ok := statusOf[code]; !ok {
					t.Errorf("%s (%q) has no row in the status table", id.Name, code)
				}
			}
			return true
		})
	}
	if seen < len(statusOf) {
		t.Errorf("read %d code constants, fewer than the %d rows of the table", seen, len(statusOf))
	}
}
