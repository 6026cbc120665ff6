package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// referenceEnv names the reference description of the API (the JSON that
// clients are written against) when it is not found next to the checkout.
const referenceEnv = "APPKB_REFERENCE_SPEC"

// The reference description, loaded once. It is not part of the repository:
// tests look for it in a shared/contract folder of a parent directory, or
// where APPKB_REFERENCE_SPEC points, and skip this check when it is absent.
var reference struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	path   string
	err    error
	warned sync.Once
}

func findReference() (string, error) {
	if p := os.Getenv(referenceEnv); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "shared", "contract", "dify-service-api.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fs.ErrNotExist
		}
		dir = parent
	}
}

// loadReference returns the reference description and a router over it, or
// nil when it is not available.
func loadReference(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	reference.once.Do(func() {
		reference.path, reference.err = findReference()
		if reference.err != nil {
			return
		}
		var data []byte
		if data, reference.err = os.ReadFile(reference.path); reference.err != nil {
			return
		}
		loader := openapi3.NewLoader()
		if reference.doc, reference.err = loader.LoadFromData(data); reference.err != nil {
			return
		}
		// Its examples are known not to match its own schemas, and its server
		// is a template for a remote host; tests call /v1 on the test server.
		if reference.err = reference.doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); reference.err != nil {
			return
		}
		reference.doc.Servers = openapi3.Servers{{URL: "/v1"}}
		reference.err = patchReference(t, reference.doc)
		if reference.err != nil {
			return
		}
		reference.router, reference.err = legacy.NewRouter(reference.doc, openapi3.DisableExamplesValidation())
	})
	if reference.err != nil {
		if errors.Is(reference.err, fs.ErrNotExist) {
			reference.warned.Do(func() {
				t.Logf("reference description not found (no shared/contract/dify-service-api.json above %s, %s unset): responses are checked against openapi.yaml only", mustGetwd(), referenceEnv)
			})
			return nil, nil
		}
		t.Fatalf("reference description %s: %v", reference.path, reference.err)
	}
	return reference.doc, reference.router
}

func mustGetwd() string {
	d, _ := os.Getwd()
	return d
}

// checkReference validates a response against the reference description as
// well: status, body and, for event streams, every event whose schema the
// reference declares under the same name as openapi.yaml's x-sse-events.
// Operations the reference does not describe (appkb's own additions) are
// not checked here.
func checkReference(t *testing.T, r request, rec *httptest.ResponseRecorder, ours *routers.Route, stream bool) {
	t.Helper()
	doc, router := loadReference(t)
	if doc == nil {
		return
	}
	req := r.build()
	route, params, err := router.FindRoute(req)
	if err != nil {
		return
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: rec.Code,
		Header: rec.Header(),
		// The reference lists only some of the error statuses Dify answers
		// with (openapi.yaml declares them all), and gives error bodies no
		// schema; success statuses must be ones it declares.
		Options: &openapi3filter.Options{IncludeResponseStatus: rec.Code < 400, MultiError: true},
	}
	if binaryResponse(route, rec.Code) {
		// Files are served with their own media type, which the reference
		// says in prose while declaring application/octet-stream.
		return
	}
	input.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s %s → %d does not match the reference description: %v\nbody: %s", r.method, r.path, rec.Code, err, truncate(rec.Body.String()))
	}
	if stream {
		checkReferenceStream(t, doc, ours, rec.Code, rec.Body.Bytes())
	}
}

func checkReferenceStream(t *testing.T, ref *openapi3.T, ours *routers.Route, status int, body []byte) {
	t.Helper()
	resp := ours.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return
	}
	media := resp.Value.Content.Get("text/event-stream")
	if media == nil {
		return
	}
	events, _ := media.Extensions["x-sse-events"].(map[string]any)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(payload), &v); err != nil {
			continue // reported by checkEventStream
		}
		name, _ := v["event"].(string)
		schemaName, _ := events[name].(string)
		schema := ref.Components.Schemas[schemaName]
		if schema == nil {
			continue
		}
		if err := schema.Value.VisitJSON(v); err != nil {
			t.Errorf("stream event %q does not match the reference's %s: %v", name, schemaName, err)
		}
	}
}

// patchReference mends the reference's known defect (see the contract's
// NOTES): the form items of /parameters are a oneOf of wrappers that do not
// require their key, so every item matches all of them. openapi.yaml's own
// form item (each wrapper requiring its key, plus the other control kinds
// real apps use) stands in for it.
func patchReference(t *testing.T, ref *openapi3.T) error {
	ours, _, _ := loadContract(t)
	src := ours.Components.Schemas["UserInputFormItem"]
	params := ref.Components.Schemas["AppParametersResponse"]
	if src == nil || params == nil || params.Value == nil {
		return errors.New("no form item schema to mend")
	}
	form := params.Value.Properties["user_input_form"]
	if form == nil || form.Value == nil || form.Value.Items == nil {
		return errors.New("AppParametersResponse has no user_input_form items")
	}
	form.Value.Items = src

	// A knowledge base created without an indexing technique has none until
	// its first document chooses one: Dify answers null there (and asks the
	// first document for the technique), though the reference's schema does
	// not say nullable.
	ds := ref.Components.Schemas["Dataset"]
	if ds == nil || ds.Value == nil || ds.Value.Properties["indexing_technique"] == nil {
		return errors.New("Dataset has no indexing_technique")
	}
	ds.Value.Properties["indexing_technique"].Value.Nullable = true
	return nil
}

// binaryResponse tells whether the reference declares the answer as raw bytes.
func binaryResponse(route *routers.Route, status int) bool {
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return false
	}
	return resp.Value.Content.Get("application/octet-stream") != nil && resp.Value.Content.Get("application/json") == nil
}
