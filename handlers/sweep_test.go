package handlers_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestEveryOperationSurvivesHostileInput walks every operation of
// openapi.yaml and sends it what a careless or hostile client would: broken
// JSON, bodies of the wrong shape, each field in turn replaced by a value of
// the wrong type, out of range or absurdly long, odd query values and path
// parameters that name nothing or are not ids at all. Every answer must be
// one the contract allows (a 5xx is a failure, and every body is checked
// against openapi.yaml), and a knowledge base and a conversation that no
// request names must read exactly the same afterwards.
//
// Operations on app keys are sent to an app of each mode when their answer
// depends on the mode. With real ids every operation reaches its handler
// and succeeds at least once; speech to text, which is sent a short
// recording, only where ffmpeg and pocketsphinx are installed.
func TestEveryOperationSurvivesHostileInput(t *testing.T) {
	doc, _, _ := loadContract(t)
	s := newTestServer(t)
	bystander := s.sweepBystander(t)
	kb := s.sweepKnowledge(t)
	apps := s.sweepApps(t)
	speech, canHear := s.sweepSpeech(t)

	sent := 0
	succeeded := map[string]bool{} // "METHOD /path" of the contract
	for _, op := range sweepOperations(doc) {
		targets := apps
		switch {
		case op.knowledge:
			targets = []sweepTarget{kb}
		case op.path == "/audio-to-text":
			targets = []sweepTarget{speech}
		}
		for i, target := range targets {
			if i > 0 && !sweepByMode(op.path) {
				continue // the same for an app of any mode: swept once
			}
			if op.knowledge && strings.Contains(op.path, "/segments") {
				s.sweepSettle(t, target.ids)
			}
			paths := map[string]string{
				"real":    op.fill(func(name string) string { return target.ids[name] }),
				"unknown": op.fill(func(name string) string { return sweepUnknown[name] }),
				"not an id": op.fill(func(string) string {
					return url.PathEscape("../x\x00y")
				}),
			}
			for _, variant := range []string{"unknown", "not an id", "real"} {
				for _, r := range op.requests(paths[variant], target, variant == "real") {
					sent++
					rec, late := s.sweep(t, r)
					if late {
						// The server drops the work of a client that is
						// gone and answers nothing. Only speech (70,000
						// characters read aloud) and a stream that follows
						// a paused run past its pause may take that long.
						if op.path != "/text-to-audio" && op.path != "/workflow/{workflow_run_id}/events" {
							t.Errorf("%s: %s %s (%s ids, body %s) took longer than the sweep waits", target.name, r.method, r.path, variant, truncate(r.body))
						}
						continue
					}
					if rec.Code >= 500 {
						t.Errorf("%s: %s %s (%s ids, body %s) → %d: %s", target.name, r.method, r.path, variant, truncate(r.body), rec.Code, truncate(rec.Body.String()))
					}
					if rec.Code < 300 {
						succeeded[strings.ToUpper(op.method)+" "+op.path] = true
					}
					if rec.Code >= 400 && op.path != "/chat/completions" && !strings.HasPrefix(op.path, "/models") { // those answer in OpenAI's shape
						var e struct{ Status int }
						if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Status != rec.Code {
							t.Errorf("%s: %s %s → %d, but the error body says %s", target.name, r.method, r.path, rec.Code, truncate(rec.Body.String()))
						}
					}
				}
			}
		}
	}
	t.Logf("%d requests", sent)
	for _, op := range sweepOperations(doc) {
		name := strings.ToUpper(op.method) + " " + op.path
		if !succeeded[name] && (canHear || name != "POST /audio-to-text") {
			t.Errorf("%s never succeeded: the sweep did not reach its handler with a request it could serve", name)
		}
	}

	after := s.sweepBystanderState(t, bystander)
	for path, was := range bystander.state {
		if after[path] != was {
			t.Errorf("GET %s changed under the sweep:\nbefore %s\nafter  %s", path, truncate(was), truncate(after[path]))
		}
	}
}

// sweep serves one request with a deadline, so that an operation which
// follows a run cannot hold the test, and checks the answer against
// openapi.yaml like do. late reports a request still served at the
// deadline; its answer is not checked.
func (s *testServer) sweep(t *testing.T, r request) (rec *httptest.ResponseRecorder, late bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rec = httptest.NewRecorder()
	s.e.ServeHTTP(rec, r.build().WithContext(ctx))
	if ctx.Err() != nil {
		return rec, true
	}
	checkResponse(t, r, rec)
	return rec, false
}

// sweepBases are plain bodies for the operations whose fields depend on
// each other in ways the schema does not say; {name} stands for the
// fixture's id.
var sweepBases = map[string]string{
	"POST /chat/completions":                                              `{"model":"{model}","messages":[{"role":"user","content":"hello"}],"user":"sweep"}`,
	"POST /datasets/tags/binding":                                         `{"tag_ids":["{tag_id}"],"target_id":"{dataset_id}"}`,
	"POST /datasets/tags/unbinding":                                       `{"tag_ids":["{tag_id}"],"target_id":"{dataset_id}"}`,
	"POST /datasets/{dataset_id}/documents/download-zip":                  `{"document_ids":["{document_id}"]}`,
	"PATCH /datasets/{dataset_id}/metadata/{metadata_id}":                 `{"name":"renamed"}`,
	"POST /messages/{message_id}/feedbacks":                               `{"rating":"like","user":"sweep","content":"fine"}`,
	"POST /conversations/{conversation_id}/name":                          `{"name":"renamed","user":"sweep"}`,
	"PUT /conversations/{conversation_id}/variables/{variable_id}":        `{"value":"changed","user":"sweep"}`,
	"POST /datasets/{dataset_id}/document/create-by-text":                 `{"name":"more.txt","text":"More text. And more.","indexing_technique":"high_quality","doc_form":"hierarchical_model","process_rule":{"mode":"hierarchical","rules":{"parent_mode":"paragraph"}}}`,
	"POST /datasets/{dataset_id}/document/create_by_text":                 `{"name":"more.txt","text":"More text. And more.","indexing_technique":"high_quality","doc_form":"hierarchical_model","process_rule":{"mode":"hierarchical","rules":{"parent_mode":"paragraph"}}}`,
	"POST /datasets/{dataset_id}/pipeline/run":                            `{"inputs":{},"datasource_type":"local_file","datasource_info_list":[{"reference":"{pipeline_file_id}"}],"start_node_id":"datasource_local_file","is_published":true,"response_mode":"blocking"}`,
	"POST /datasets/{dataset_id}/pipeline/datasource/nodes/{node_id}/run": `{"inputs":{},"datasource_type":"local_file","datasource_info_list":[{"reference":"{pipeline_file_id}"}],"is_published":true}`,
	"POST /form/human_input/{form_token}":                                 `{"inputs":{"comment":"fine"},"action":"approve","user":"sweep"}`,
}

// sweepIDs puts the fixtures' ids into a body template.
func sweepIDs(template string, ids map[string]string) string {
	for name, id := range ids {
		template = strings.ReplaceAll(template, "{"+name+"}", id)
	}
	return template
}

// sweepByMode reports whether an app operation behaves by the app's mode,
// so that the sweep sends it to an app of every mode.
func sweepByMode(path string) bool {
	for _, prefix := range []string{"/chat-messages", "/completion-messages", "/workflow", "/conversations",
		"/messages", "/chat/completions", "/parameters", "/text-to-audio", "/form/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// sweepUnknown holds path parameter values that are well formed but name
// nothing stored.
var sweepUnknown = map[string]string{
	"action":     "bogus",
	"model_type": "bogus",
	"model":      "bogus",
	"batch":      "20260101000000000000",
}

func init() {
	for _, name := range []string{"annotation_id", "child_chunk_id", "conversation_id", "dataset_id", "document_id",
		"end_user_id", "file_id", "form_token", "job_id", "message_id", "metadata_id", "node_id", "segment_id",
		"task_id", "variable_id", "workflow_id", "workflow_run_id"} {
		sweepUnknown[name] = "00000000-0000-4000-8000-00000000abcd"
	}
}

// sweepOp is one operation of the contract as the sweep needs it.
type sweepOp struct {
	method, path string
	knowledge    bool // opened by a knowledge key
	op           *openapi3.Operation
}

// sweepOperations lists the contract's operations, deletions last and the
// deepest of them first, so that the fixtures live as long as possible.
func sweepOperations(doc *openapi3.T) []sweepOp {
	var ops []sweepOp
	for path, item := range doc.Paths.Map() {
		if len(item.Servers) > 0 {
			// The admin API (under /admin/v1, its paths' own server) holds
			// the test double's controls, reset among them; admin_test.go
			// covers it.
			continue
		}
		for method, op := range item.Operations() {
			o := sweepOp{method: method, path: path, op: op}
			if op.Security != nil {
				for _, req := range *op.Security {
					if _, ok := req["KnowledgeKey"]; ok {
						o.knowledge = true
					}
				}
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		a, b := ops[i], ops[j]
		if (a.method == "DELETE") != (b.method == "DELETE") {
			return b.method == "DELETE"
		}
		if a.method == "DELETE" && strings.Count(a.path, "/") != strings.Count(b.path, "/") {
			return strings.Count(a.path, "/") > strings.Count(b.path, "/")
		}
		if a.path != b.path {
			return a.path < b.path
		}
		return a.method < b.method
	})
	return ops
}

// fill puts values into the path's parameters; an empty value keeps a
// fixed unknown one.
func (o sweepOp) fill(value func(name string) string) string {
	path := o.path
	for {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			return "/v1" + path
		}
		end := strings.IndexByte(path[open:], '}') + open
		name := path[open+1 : end]
		v := value(name)
		if v == "" {
			v = sweepUnknown[name]
		}
		path = path[:open] + v + path[end+1:]
	}
}

// sweepBadValues replace one field at a time: wrong types, empty and
// absurd values.
var sweepBadValues = []any{
	nil, "", "x\x00y", strings.Repeat("ä", 70_000), json.Number("-1"), json.Number("0"), json.Number("1.5"),
	json.Number("123456789012345678901234567890"), json.Number("-1e308"), true, []any{}, []any{nil, 1, "a"},
	map[string]any{}, map[string]any{"": nil}, sweepDeep(200),
}

func sweepDeep(n int) any {
	var v any = "bottom"
	for range n {
		v = []any{v}
	}
	return v
}

var sweepQueryValues = []string{"", "-1", "0", "abc", "99999999999999999999", "1.5", "\x00", "%", strings.Repeat("z", 5000), "true"}

// sweepSample is what the sweep sends under the race detector (make test):
// a few values of each kind. The whole sweep runs without it (make
// test-postgres, on PostgreSQL).
func sweepSample[T any](all []T, pick ...int) []T {
	if !raceDetector {
		return all
	}
	out := make([]T, 0, len(pick))
	for _, i := range pick {
		out = append(out, all[i])
	}
	return out
}

// requests builds the hostile requests of one operation at one path. With
// real ids every field is also replaced in turn; with ids that name
// nothing the broken bodies and the plain one are enough.
func (o sweepOp) requests(path string, target sweepTarget, deep bool) []request {
	ids := target.ids
	base := request{method: strings.ToUpper(o.method), path: path, key: target.key}
	var out []request

	// Query parameters: the required ones and those naming a fixture take
	// plain values, then each parameter in turn takes the odd ones.
	query := url.Values{}
	var queryNames []string
	for _, p := range o.op.Parameters {
		if p.Value == nil || p.Value.In != "query" {
			continue
		}
		queryNames = append(queryNames, p.Value.Name)
		if p.Value.Required || ids[p.Value.Name] != "" || p.Value.Name == "user" {
			query.Set(p.Value.Name, sweepQueryValue(p.Value.Name, ids))
		}
	}
	withQuery := func(q url.Values) string {
		if len(q) == 0 {
			return path
		}
		return path + "?" + q.Encode()
	}
	base.path = withQuery(query)

	var bodies []request
	plainReq := base // the body of a plain call, when there is one
	var media string
	var schema *openapi3.Schema
	if o.op.RequestBody != nil && o.op.RequestBody.Value != nil {
		for mt, m := range o.op.RequestBody.Value.Content {
			media = mt
			if m.Schema != nil {
				schema = m.Schema.Value
			}
		}
	}
	switch {
	case strings.HasPrefix(media, "multipart/"):
		for _, b := range []struct{ body, ct string }{
			{"not a form", "multipart/form-data"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nsweep\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../etc/passwd\"\r\nContent-Type: text/plain\r\n\r\n\r\n--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nsweep\r\n--xyz\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\n{\"indexing_technique\":1}\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\x00b.txt\"\r\nContent-Type: text/plain\r\n\r\nnul\x00inside\r\n--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nx\x00y\r\n--xyz\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\n{\"name\":\"a\\u0000b\"}\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nx\x00y\r\n--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"note.txt\"\r\nContent-Type: text/plain\r\n\r\nnul\x00inside\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"more.txt\"\r\nContent-Type: text/plain\r\n\r\nMore text. And more.\r\n--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nsweep\r\n--xyz\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\n{\"indexing_technique\":\"high_quality\",\"doc_form\":\"hierarchical_model\",\"process_rule\":{\"mode\":\"hierarchical\",\"rules\":{\"parent_mode\":\"paragraph\"}}}\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
			{"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.docx\"\r\nContent-Type: application/vnd.openxmlformats-officedocument.wordprocessingml.document\r\n\r\nPK\x03\x04garbage\r\n--xyz\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nsweep\r\n--xyz--\r\n", "multipart/form-data; boundary=xyz"},
		} {
			r := base
			r.body, r.contentType = b.body, b.ct
			bodies = append(bodies, r)
		}
		if target.form != "" {
			r := base
			r.body, r.contentType = target.form, target.formType
			bodies = append(bodies, r)
		}
	case media != "":
		for _, raw := range []string{"{", "[]", "null", `"x"`, "1e999", `{"a":1,"a":2}`} {
			r := base
			r.body = raw
			bodies = append(bodies, r)
		}
		plain, _ := sweepValue(schema, "", ids, 0).(map[string]any)
		template, given := sweepBases[strings.ToUpper(o.method)+" "+o.path]
		if given {
			plain = nil
			if err := json.Unmarshal([]byte(sweepIDs(template, ids)), &plain); err != nil {
				panic(err)
			}
		}
		if plain == nil {
			plain = map[string]any{}
		}
		if _, ok := schema.Properties["inputs"]; ok && target.inputs != nil && !given {
			plain["inputs"] = target.inputs
		}
		if _, ok := schema.Properties["response_mode"]; ok && target.stream {
			plain["response_mode"] = "streaming"
		}
		plainReq = base
		plainReq.body = sweepJSON(plain)
		if deep && schema != nil {
			for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
				for _, bad := range sweepSample(sweepBadValues, 0, 2, 7, 10, 14) {
					changed := maps.Clone(plain)
					changed[name] = bad
					r := base
					r.body = sweepJSON(changed)
					bodies = append(bodies, r)
				}
			}
			// Each input of the app in turn, too: the runtimes check
			// them against the app's form.
			if inputs, ok := plain["inputs"].(map[string]any); ok {
				for _, name := range slices.Sorted(maps.Keys(inputs)) {
					for _, bad := range sweepSample(sweepBadValues, 0, 2, 7, 10, 14) {
						changed := maps.Clone(inputs)
						changed[name] = bad
						withInputs := maps.Clone(plain)
						withInputs["inputs"] = changed
						r := base
						r.body = sweepJSON(withInputs)
						bodies = append(bodies, r)
					}
				}
			}
		}
	}
	// The plain body goes last, so that the changed ones still find what
	// it would delete or answer (a human input form takes one answer).
	out = append(out, bodies...)
	out = append(out, plainReq)

	// The odd query values go with the plain body (or none).
	if deep || len(queryNames) > 0 {
		for _, name := range queryNames {
			for _, v := range sweepSample(sweepQueryValues, 1, 3, 4, 6) {
				q := maps.Clone(query)
				q.Set(name, v)
				r := plainReq
				r.path = withQuery(q)
				out = append(out, r)
			}
		}
	}
	return out
}

func sweepQueryValue(name string, ids map[string]string) string {
	if v := ids[name]; v != "" {
		return v
	}
	if name == "user" {
		return "sweep"
	}
	return "1"
}

// sweepValue builds a plain value the schema accepts: the required
// properties of an object, the first of an enum, the least of a range.
// Fields named like a fixture take the fixture's id.
func sweepValue(s *openapi3.Schema, name string, ids map[string]string, depth int) any {
	if s == nil || depth > 6 {
		return nil
	}
	if v, ok := ids[name]; ok && v != "" {
		return v
	}
	if name == "user" {
		return "sweep"
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	for _, alts := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(alts) > 0 && alts[0].Value != nil {
			return sweepValue(alts[0].Value, name, ids, depth+1)
		}
	}
	if len(s.AllOf) > 0 {
		merged := map[string]any{}
		for _, part := range s.AllOf {
			if m, ok := sweepValue(part.Value, name, ids, depth+1).(map[string]any); ok {
				for k, v := range m {
					merged[k] = v
				}
			}
		}
		return merged
	}
	switch {
	case s.Type.Is("object") || len(s.Properties) > 0:
		obj := map[string]any{}
		for _, req := range s.Required {
			if p := s.Properties[req]; p != nil {
				obj[req] = sweepValue(p.Value, req, ids, depth+1)
			} else {
				obj[req] = "x"
			}
		}
		// Optional fields that name the fixtures' user or ids are
		// filled in too: without them most operations stop at "not
		// found" before the field under test is looked at.
		for name, p := range s.Properties {
			if _, done := obj[name]; !done && (name == "user" || ids[name] != "") {
				obj[name] = sweepValue(p.Value, name, ids, depth+1)
			}
		}
		return obj
	case s.Type.Is("array"):
		if s.MinItems > 0 && s.Items != nil {
			return []any{sweepValue(s.Items.Value, "", ids, depth+1)}
		}
		return []any{}
	case s.Type.Is("string"):
		// Unique, so that names taken by an earlier call (a tag, a
		// metadata field) do not refuse this one.
		sweepStrings++
		v := fmt.Sprintf("q%d", sweepStrings)
		if n := int(s.MinLength); len(v) < n {
			v += strings.Repeat("q", n-len(v))
		}
		if s.MaxLength != nil && int(*s.MaxLength) < len(v) {
			v = v[:*s.MaxLength]
		}
		return v
	case s.Type.Is("integer"), s.Type.Is("number"):
		if s.Min != nil {
			return *s.Min
		}
		return 1
	case s.Type.Is("boolean"):
		return true
	}
	return "x"
}

// sweepStrings counts the strings sweepValue made.
var sweepStrings int

func sweepJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sweepTarget is what one pass of the sweep sends its requests with: a
// key, the ids of fixtures its key reaches, and the inputs its app's form
// asks for.
type sweepTarget struct {
	name   string
	key    string
	ids    map[string]string
	inputs map[string]any
	stream bool // the app answers only in streaming mode
	// form is one more multipart body that the target's app can serve
	// (a recording, for speech to text), with its content type.
	form, formType string
}

// sweepSpeech returns a target for speech to text: a chat app that takes
// recordings, with a short one for the builtin model to transcribe.
// canHear reports whether this machine has the programs the builtin model
// transcribes with; without them the recording fails like any other.
func (s *testServer) sweepSpeech(t *testing.T) (target sweepTarget, canHear bool) {
	t.Helper()
	_, key := s.importText(t, mediaApp)
	body, ct := multipartForm(t, fileField("tone.wav", "audio/wav", sweepRecording()), userField("sweep"))
	canHear = true
	for _, p := range []string{"ffmpeg", "pocketsphinx_continuous"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Logf("%s is not installed: speech to text is swept but need not succeed", p)
			canHear = false
		}
	}
	return sweepTarget{name: "speech", key: key, ids: map[string]string{}, form: body, formType: ct}, canHear
}

// sweepRecording is a quarter of a second of a 440 Hz tone: a WAV file,
// 16 kHz, mono, 16-bit.
func sweepRecording() []byte {
	const rate, samples = 16000, 4000
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*samples))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // mono
	le(uint32(rate))
	le(uint32(2 * rate))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * samples))
	for i := range samples {
		le(int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate)))
	}
	return b.Bytes()
}

// sweepPost creates a fixture and decodes the answer.
func (s *testServer) sweepPost(t *testing.T, path, key, body string) map[string]any {
	t.Helper()
	rec := s.do(t, request{method: "POST", path: path, key: key, body: body})
	if rec.Code >= 300 {
		t.Fatalf("fixture POST %s: %d %s", path, rec.Code, rec.Body)
	}
	var out map[string]any
	kbDecode(t, rec, &out)
	return out
}

func sweepString(v any) string { s, _ := v.(string); return s }

// sweepKnowledge creates what the knowledge operations point at: a
// knowledge base with an indexed parent-child document, a metadata field,
// a tag and a file for its pipeline.
func (s *testServer) sweepKnowledge(t *testing.T) sweepTarget {
	t.Helper()
	k := s.knowledgeKey
	ids := map[string]string{"action": "enable", "model_type": "text-embedding"}
	ds := s.sweepPost(t, "/v1/datasets", k, `{"name":"sweep target","indexing_technique":"high_quality"}`)
	ids["dataset_id"] = sweepString(ds["id"])
	created := s.sweepPost(t, "/v1/datasets/"+ids["dataset_id"]+"/document/create-by-text", k,
		`{"name":"target.txt","text":"Rivers carry silt to the sea. They cut valleys.\n\nMountains stand still for ages. Snow caps them.","indexing_technique":"high_quality","doc_form":"hierarchical_model","process_rule":{"mode":"hierarchical","rules":{"parent_mode":"paragraph"}}}`)
	ids["document_id"] = sweepString(at(created, "document", "id"))
	ids["batch"] = sweepString(created["batch"])
	docWait(t, s, ids["dataset_id"], ids["batch"])
	s.sweepSegment(t, ids)
	field := s.sweepPost(t, "/v1/datasets/"+ids["dataset_id"]+"/metadata", k, `{"type":"string","name":"origin"}`)
	ids["metadata_id"] = sweepString(field["id"])
	tag := s.sweepPost(t, "/v1/datasets/tags", k, `{"name":"swept"}`)
	ids["tag_id"] = sweepString(tag["id"])
	body, ct := multipartForm(t, fileField("lunch.txt", "text/plain", []byte("Lunch is served from noon.")))
	rec := s.do(t, request{method: "POST", path: "/v1/datasets/pipeline/file-upload", key: k, body: body, contentType: ct})
	expectStatus(t, rec, 201, "")
	var file map[string]any
	kbDecode(t, rec, &file)
	ids["pipeline_file_id"] = sweepString(file["id"])
	ids["node_id"] = "datasource_local_file"
	sweepComplete(t, "knowledge", ids)
	return sweepTarget{name: "knowledge", key: k, ids: ids}
}

// sweepSettle waits for the target document to be indexed again (the
// operations that replace its text run before the segment operations)
// and points the chunk ids at its current chunks.
func (s *testServer) sweepSettle(t *testing.T, ids map[string]string) {
	t.Helper()
	doc := "/v1/datasets/" + ids["dataset_id"] + "/documents/" + ids["document_id"]
	wait := func() string {
		for range 300 {
			status := sweepString(s.getJSON(t, doc, s.knowledgeKey)["indexing_status"])
			if status == "completed" || status == "error" {
				return status
			}
			time.Sleep(10 * time.Millisecond)
		}
		return "indexing"
	}
	if wait() == "error" {
		// A broken file replaced the text: give it readable text again.
		s.sweepPost(t, doc+"/update-by-text", s.knowledgeKey, `{"name":"target.txt","text":"Rivers carry silt to the sea."}`)
		wait()
	}
	s.sweepSegment(t, ids)
}

// sweepSegment points segment_id and child_chunk_id at the target
// document's first chunk and its first child.
func (s *testServer) sweepSegment(t *testing.T, ids map[string]string) {
	t.Helper()
	segs := s.getJSON(t, "/v1/datasets/"+ids["dataset_id"]+"/documents/"+ids["document_id"]+"/segments", s.knowledgeKey)
	ids["segment_id"] = sweepString(at(segs, "data", 0, "id"))
	ids["child_chunk_id"] = sweepString(at(segs, "data", 0, "child_chunks", 0, "id"))
}

// sweepApps returns a target for the demo chat app and for one imported
// app of every other mode, each with a conversation or run, a message, an
// uploaded file and, for the demo app, an annotation and its reply job.
func (s *testServer) sweepApps(t *testing.T) []sweepTarget {
	t.Helper()
	demo := sweepTarget{name: "chat", key: s.appKey}
	targets := []sweepTarget{demo}
	for _, imp := range []struct {
		name, file, text string
		inputs           map[string]any
	}{
		{"completion", "completion.yml", "", map[string]any{"product": "kettle", "tone": "formal"}},
		{"workflow", "workflow.yml", "", map[string]any{"invoice_text": "Net 100 EUR", "currency": "EUR"}},
		{"advanced-chat", "advanced-chat.yml", "", map[string]any{"plan": "pro"}},
		// testdata's agent uses a search tool no tools file maps here.
		{"agent-chat", "", sweepAgent, nil},
		{"human-input", "", approvalApp, map[string]any{"doc": "the plan"}},
	} {
		var key string
		if imp.text != "" {
			_, key = s.importText(t, imp.text)
		} else {
			_, key = s.importApp(t, imp.file)
		}
		targets = append(targets, sweepTarget{name: imp.name, key: key, inputs: imp.inputs, stream: imp.name == "agent-chat"})
	}
	for i := range targets {
		tg := &targets[i]
		tg.ids = map[string]string{"action": "enable"}
		tg.ids["model"] = sweepString(at(s.getJSON(t, "/v1/models", tg.key), "data", 0, "id"))
		inputs := sweepJSON(tg.inputs)
		if tg.inputs == nil {
			inputs = "{}"
		}
		switch tg.name {
		case "completion":
			msg := s.sweepPost(t, "/v1/completion-messages", tg.key, `{"inputs":`+inputs+`,"user":"sweep","response_mode":"blocking"}`)
			tg.ids["message_id"] = sweepString(msg["message_id"])
			tg.ids["task_id"] = sweepString(msg["task_id"])
		case "workflow":
			run := s.sweepPost(t, "/v1/workflows/run", tg.key, `{"inputs":`+inputs+`,"user":"sweep","response_mode":"blocking"}`)
			tg.ids["workflow_run_id"] = sweepString(run["workflow_run_id"])
			tg.ids["task_id"] = sweepString(run["task_id"])
			stored := s.getJSON(t, "/v1/workflows/run/"+tg.ids["workflow_run_id"], tg.key)
			tg.ids["workflow_id"] = sweepString(stored["workflow_id"])
		case "human-input":
			// The run pauses at its form: the form's token names it.
			rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: tg.key, body: `{"inputs":` + inputs + `,"user":"sweep","response_mode":"streaming"}`})
			expectStatus(t, rec, 200, "")
			for _, f := range readFrames(t, rec.Body.String()) {
				if f.str("event") == "human_input_required" {
					tg.ids["form_token"] = sweepString(at(map[string]any(f), "data", "form_token"))
					tg.ids["workflow_run_id"] = f.str("workflow_run_id")
					tg.ids["task_id"] = f.str("task_id")
				}
			}
		case "agent-chat":
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: tg.key, body: `{"query":"hello","inputs":{},"user":"sweep","response_mode":"streaming"}`})
			expectStatus(t, rec, 200, "")
			first := readFrames(t, rec.Body.String())[0]
			tg.ids["conversation_id"] = first.str("conversation_id")
			tg.ids["message_id"] = first.str("message_id")
			tg.ids["task_id"] = first.str("task_id")
		default:
			msg := s.sweepPost(t, "/v1/chat-messages", tg.key, `{"query":"hello","inputs":`+inputs+`,"user":"sweep","response_mode":"blocking"}`)
			tg.ids["conversation_id"] = sweepString(msg["conversation_id"])
			tg.ids["message_id"] = sweepString(msg["message_id"])
			tg.ids["task_id"] = sweepString(msg["task_id"])
			if tg.name == "advanced-chat" {
				vars := s.getJSON(t, "/v1/conversations/"+tg.ids["conversation_id"]+"/variables?user=sweep", tg.key)
				tg.ids["variable_id"] = sweepString(at(vars, "data", 0, "id"))
			}
		}
		body, ct := multipartForm(t, userField("sweep"), fileField("note.txt", "text/plain", []byte("a small note")))
		rec := s.do(t, request{method: "POST", path: "/v1/files/upload", key: tg.key, body: body, contentType: ct})
		if rec.Code != http.StatusCreated {
			t.Fatalf("fixture upload: %d %s", rec.Code, rec.Body)
		}
		var file map[string]any
		kbDecode(t, rec, &file)
		tg.ids["file_id"] = sweepString(file["id"])
		tg.ids["upload_file_id"] = tg.ids["file_id"]
		tg.ids["end_user_id"] = sweepString(file["created_by"])
	}
	ann := s.sweepPost(t, "/v1/apps/annotations", demo.key, `{"question":"q?","answer":"a."}`)
	targets[0].ids["annotation_id"] = sweepString(ann["id"])
	job := s.sweepPost(t, "/v1/apps/annotation-reply/enable", demo.key, `{"score_threshold":0.9,"embedding_provider_name":"appkb","embedding_model_name":"builtin-embedding"}`)
	targets[0].ids["job_id"] = sweepString(job["job_id"])
	for _, tg := range targets {
		sweepComplete(t, tg.name, tg.ids)
	}
	return targets
}

// sweepAgent is an agent app with one built-in tool.
const sweepAgent = `app: {mode: agent-chat, name: Sweep agent}
kind: app
version: 0.3.0
model_config:
  model: {provider: langgenius/openai/openai, name: gpt-4o, mode: chat, completion_params: {}}
  pre_prompt: Use your tools.
  agent_mode:
    enabled: true
    strategy: function_call
    max_iteration: 3
    tools:
    - {enabled: true, provider_type: builtin, provider_id: time, provider_name: time, tool_name: timestamp_to_localtime, tool_label: Local time, tool_parameters: {timezone: UTC}}
  user_input_form: []
`

// sweepComplete fails the test when a fixture came back without its id.
func sweepComplete(t *testing.T, name string, ids map[string]string) {
	t.Helper()
	for k, v := range ids {
		if v == "" {
			t.Fatalf("%s fixture %s has no id", name, k)
		}
	}
}

// sweepState is what the bystander fixtures read as before the sweep.
type sweepState struct {
	dataset, document, conversation string
	state                           map[string]string
}

// sweepBystander creates a knowledge base with a document and a
// conversation that no request of the sweep names, and reads them.
func (s *testServer) sweepBystander(t *testing.T) sweepState {
	t.Helper()
	rec := s.do(t, request{method: "POST", path: "/v1/datasets", key: s.knowledgeKey, body: `{"name":"bystander","indexing_technique":"high_quality"}`})
	expectStatus(t, rec, 200, "")
	var ds struct{ ID string }
	kbDecode(t, rec, &ds)
	rec = s.do(t, request{method: "POST", path: "/v1/datasets/" + ds.ID + "/document/create-by-text", key: s.knowledgeKey,
		body: `{"name":"keep.txt","text":"Nothing here may change.","indexing_technique":"high_quality","process_rule":{"mode":"automatic"}}`})
	expectStatus(t, rec, 200, "")
	var created docCreated
	kbDecode(t, rec, &created)
	docWait(t, s, ds.ID, created.Batch)
	rec = s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.appKey,
		body: `{"query":"remember me","inputs":{},"user":"bystander","response_mode":"blocking"}`})
	expectStatus(t, rec, 200, "")
	var msg struct {
		ConversationID string `json:"conversation_id"`
	}
	kbDecode(t, rec, &msg)
	b := sweepState{dataset: ds.ID, document: created.Document.ID, conversation: msg.ConversationID}
	b.state = s.sweepBystanderState(t, b)
	return b
}

func (s *testServer) sweepBystanderState(t *testing.T, b sweepState) map[string]string {
	t.Helper()
	kb := "/v1/datasets/" + b.dataset
	reads := []struct{ path, key string }{
		{kb, s.knowledgeKey},
		{kb + "/documents", s.knowledgeKey},
		{kb + "/documents/" + b.document, s.knowledgeKey},
		{kb + "/documents/" + b.document + "/segments", s.knowledgeKey},
		{kb + "/metadata", s.knowledgeKey},
		{kb + "/tags", s.knowledgeKey},
		{"/v1/conversations?user=bystander", s.appKey},
		{fmt.Sprintf("/v1/messages?user=bystander&conversation_id=%s", b.conversation), s.appKey},
	}
	out := map[string]string{}
	for _, r := range reads {
		rec := s.do(t, request{method: "GET", path: r.path, key: r.key})
		expectStatus(t, rec, 200, "")
		out[r.path] = rec.Body.String()
	}
	return out
}
