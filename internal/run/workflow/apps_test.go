package workflow

import (
	"context"
	"strings"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/llm"
)

func TestChatflowApp(t *testing.T) {
	def := loadApp(t, "../../../testdata/apps/advanced-chat.yml")
	g, err := Compile(def.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query, plan string
		wantAnswer        string
		wantNodes         string
		wantTopic         string
	}{
		{"refund question takes the refund LLM and streams its answer", "I want a refund", "free",
			`You said: "I want a refund"`, "1718000000001 1718000000002 1718000000003 1718000000005", ""},
		{"enterprise customer gets the fixed answer", "hello", "enterprise",
			"Thanks Ann, your account manager will reply within the hour.", "1718000000001 1718000000002 1718000000007", ""},
		{"other questions take the general LLM and remember the topic", "where is my parcel", "free",
			"I am appkb's built-in offline model", "1718000000001 1718000000002 1718000000004 1718000000006 1718000000008", "where is my parcel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, rec := run1(t, &Engine{}, RunInput{
				Graph: g, Mode: ModeChatflow, Query: tc.query, ConversationID: "3f1c1e5e-8f7a-4e57-9d1b-2b9f8f1c0a01",
				MessageID: "6a0e0c43-4d0b-4b8e-9a55-0e0d8e2e7d11", Inputs: map[string]any{"plan": tc.plan, "customer_name": "Ann"},
				History: []llm.Message{{Role: llm.RoleUser, Content: "earlier"}, {Role: llm.RoleAssistant, Content: "reply"}},
			})
			checkOrder(t, rec)
			if res.Status != RunSucceeded {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			if !strings.Contains(res.Answer, tc.wantAnswer) || rec.text() != res.Answer {
				t.Errorf("answer %q (streamed %q), want it to contain %q", res.Answer, rec.text(), tc.wantAnswer)
			}
			if res.Outputs["answer"] != res.Answer {
				t.Errorf("outputs %v", res.Outputs)
			}
			var ran []string
			for _, e := range rec.events {
				if x, ok := e.(*NodeFinished); ok {
					ran = append(ran, x.Data.NodeID)
				}
			}
			if strings.Join(ran, " ") != tc.wantNodes {
				t.Errorf("nodes %v, want %s", ran, tc.wantNodes)
			}
			if got := res.ConversationVariables["last_topic"]; got != tc.wantTopic {
				t.Errorf("last_topic %q, want %q", got, tc.wantTopic)
			}
			// The streamed LLM answer arrives as several chunks before the
			// answer node finishes.
			if strings.Contains(tc.wantNodes, "1718000000003") {
				chunks := 0
				for _, e := range rec.events {
					if x, ok := e.(*TextChunk); ok {
						chunks++
						if x.Data.FromVariableSelector[0] != "1718000000003" {
							t.Errorf("chunk from %v", x.Data.FromVariableSelector)
						}
					}
				}
				if chunks < 3 {
					t.Errorf("only %d chunks", chunks)
				}
				if f := rec.finished("1718000000003"); f.ExecutionMetadata["total_tokens"].(int) <= 0 || res.TotalTokens <= 0 {
					t.Errorf("no token usage: %v / %d", f.ExecutionMetadata, res.TotalTokens)
				}
			}
		})
	}
}

func TestWorkflowApp(t *testing.T) {
	inputs := map[string]any{"invoice_text": "Paper 10\nInk 20.5", "vat_rate": "10", "currency": "USD"}
	t.Run("as exported: the python3 code node fails the run", func(t *testing.T) {
		def := loadApp(t, "../../../testdata/apps/workflow.yml")
		res, rec := run1(t, &Engine{}, RunInput{Workflow: def.Workflow, Inputs: inputs})
		checkOrder(t, rec)
		if res.Status != RunFailed || !strings.Contains(res.Error, "python3, which is not available yet") {
			t.Fatalf("got %s %q", res.Status, res.Error)
		}
	})
	t.Run("with the code in javascript: the tool falls back to its default value", func(t *testing.T) {
		def := loadApp(t, "../../../testdata/apps/workflow.yml")
		for i, n := range def.Workflow.Graph.Nodes {
			if n.Kind() == apps.NodeCode {
				def.Workflow.Graph.Nodes[i].Data["code_language"] = "javascript"
				def.Workflow.Graph.Nodes[i].Data["code"] = `function main({invoice_text, vat_rate}) {
  const lines = invoice_text.split("\n").filter(l => l.trim());
  let net = 0;
  for (const l of lines) { const p = parseFloat(l.trim().split(" ").pop()); if (!isNaN(p)) net += p; }
  return {net: net, gross: Math.round(net * (1 + vat_rate / 100) * 100) / 100, lines: lines.length};
}`
			}
		}
		res, rec := run1(t, &Engine{}, RunInput{Workflow: def.Workflow, Inputs: inputs})
		checkOrder(t, rec)
		if res.Status != RunPartialSucceeded || res.ExceptionsCount != 1 {
			t.Fatalf("got %s %q", res.Status, res.Error)
		}
		want := map[string]any{"net": 30.5, "gross_converted": "conversion unavailable", "line_count": float64(2)}
		for k, v := range want {
			if res.Outputs[k] != v {
				t.Errorf("%s = %v, want %v", k, res.Outputs[k], v)
			}
		}
		if f := rec.finished("convert"); f.Status != NodeException || !strings.Contains(*f.Error, `"tool"`) {
			t.Errorf("tool node: %+v", f)
		}
	})
}

func TestCompare(t *testing.T) {
	tests := []struct {
		op       string
		actual   any
		expected any
		want     bool
	}{
		{"contains", "a refund now", "refund", true},
		{"contains", []any{"a", "b"}, "b", true},
		{"not contains", "abc", "z", true},
		{"start with", "abc", "ab", true},
		{"end with", "abc", "bc", true},
		{"is", "x", "x", true},
		{"is", true, "true", true},
		{"is not", "x", "y", true},
		{"empty", "", nil, true},
		{"empty", []any{}, nil, true},
		{"not empty", "a", nil, true},
		{"in", "b", []any{"a", "b"}, true},
		{"not in", "c", []any{"a", "b"}, true},
		{"all of", []any{"a", "b", "c"}, []any{"a", "c"}, true},
		{"=", float64(3), "3", true},
		{"≠", 3, "4", true},
		{">", "10", "9", true},
		{"<", 1, 2, true},
		{"≥", 2, 2, true},
		{"≤", 3, 2, false},
		{"null", nil, nil, true},
		{"not null", 0, nil, true},
		{"exists", "x", nil, true},
		{"not exists", nil, nil, true},
		{">", nil, 1, false},
	}
	for _, tc := range tests {
		got, err := compare(tc.op, tc.actual, tc.expected)
		if err != nil || got != tc.want {
			t.Errorf("%v %s %v = %v, %v; want %v", tc.actual, tc.op, tc.expected, got, err, tc.want)
		}
	}
	if _, err := compare("≈", 1, 1); err == nil {
		t.Error("unknown operator accepted")
	}
}

func TestAssigner(t *testing.T) {
	src := `conversation_variables:
  - {name: s, value_type: string, value: a}
  - {name: n, value_type: number, value: 1}
  - {name: l, value_type: 'array[string]', value: [x]}
  - {name: c, value_type: string, value: keep}
` + graph(`
  - id: v1
    data: {type: assigner, title: V1, assigned_variable_selector: [conversation, s], write_mode: over-write, input_variable_selector: [start, q]}
  - id: v2
    data: {type: assigner, title: V2, version: '2', items: [
      {variable_selector: [conversation, n], input_type: constant, operation: '+=', value: 4},
      {variable_selector: [conversation, l], input_type: variable, operation: append, value: [start, q]},
      {variable_selector: [conversation, c], operation: clear}]}`,
		edge("start", "source", "v1"), edge("v1", "source", "v2"))
	res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Mode: ModeChatflow, Inputs: map[string]any{"q": "hey"},
		ConversationVariables: map[string]any{"n": float64(10)}})
	if res.Status != RunSucceeded {
		t.Fatalf("%s %s %s", res.Status, res.Error, rec.trace())
	}
	cv := res.ConversationVariables
	if cv["s"] != "hey" || cv["n"] != float64(14) || Text(cv["l"]) != `["x","hey"]` || cv["c"] != "" {
		t.Errorf("conversation variables %v", cv)
	}
}

func TestClassifierAndExtractor(t *testing.T) {
	src := graph(`
  - id: qc
    data: {type: question-classifier, title: QC, query_variable_selector: [start, q], model: {provider: appkb, name: builtin},
      classes: [{id: c1, name: Billing and invoices}, {id: c2, name: Shipping and delivery}]}
  - id: pe
    data: {type: parameter-extractor, title: PE, query: [start, q], model: {provider: appkb, name: builtin}, parameters: [
      {name: count, type: number, required: true}, {name: speed, type: select, options: [fast, slow]}, {name: tags, type: 'array[string]'}]}
  - id: other
    data: {type: template-transform, title: O, template: other, variables: []}
  - id: end
    data: {type: end, title: End, outputs: [{variable: cls, value_selector: [qc, class_name]}, {variable: count, value_selector: [pe, count]},
      {variable: speed, value_selector: [pe, speed]}, {variable: ok, value_selector: [pe, __is_success]}]}`,
		edge("start", "source", "qc"), edge("qc", "c2", "pe"), edge("qc", "c1", "other"), edge("pe", "source", "end"))
	res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "fast delivery of 3 parcels"}})
	if res.Status != RunSucceeded {
		t.Fatalf("%s %s %s", res.Status, res.Error, rec.trace())
	}
	want := map[string]any{"cls": "Shipping and delivery", "count": float64(3), "speed": "fast", "ok": float64(1)}
	for k, v := range want {
		if res.Outputs[k] != v {
			t.Errorf("%s = %v, want %v", k, res.Outputs[k], v)
		}
	}
}

type fakeRetriever struct{}

func (fakeRetriever) Retrieve(_ context.Context, req RetrieveRequest) ([]map[string]any, error) {
	return []map[string]any{{"content": "Refunds take five days.", "title": "faq", "metadata": map[string]any{"dataset_id": req.DatasetIDs[0]}}}, nil
}

func TestKnowledgeIntoLLM(t *testing.T) {
	src := graph(`
  - id: k
    data: {type: knowledge-retrieval, title: K, query_variable_selector: [start, q], dataset_ids: [d1]}
  - id: l
    data: {type: llm, title: L, model: {provider: openai, name: gpt-4o-mini, mode: chat}, context: {enabled: true, variable_selector: [k, result]},
      prompt_template: [{role: system, text: 'Use {{#context#}}'}, {role: user, text: '{{#start.q#}}'}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: a, value_selector: [l, text]}]}`,
		edge("start", "source", "k"), edge("k", "source", "l"), edge("l", "source", "end"))
	res, rec := run1(t, &Engine{Retriever: fakeRetriever{}}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "how long do refunds take"}})
	if res.Status != RunSucceeded || res.Outputs["a"] != "Refunds take five days." {
		t.Fatalf("%s %q %v", res.Status, res.Error, res.Outputs)
	}
	// A workflow streams llm text that goes straight to the end node.
	if rec.text() != "Refunds take five days." {
		t.Errorf("streamed %q", rec.text())
	}
	p := rec.finished("l").ProcessData["prompts"].([]any)
	if !strings.Contains(Text(p[0]), "Use Refunds take five days.") {
		t.Errorf("prompts %v", p)
	}
}
