package llm

import (
	"context"
	"testing"
)

func TestBuiltinToolCalling(t *testing.T) {
	clock := Tool{Name: "current_time", Label: "Current Time", Parameters: map[string]any{"type": "object", "properties": map[string]any{
		"timezone": map[string]any{"type": "string"}, "format": map[string]any{"type": "string"}}}}
	stats := Tool{Name: "text_stats", Parameters: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}
	add := Tool{Name: "add", Parameters: map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}}
	user := func(s string) Message { return Message{Role: RoleUser, Content: s} }
	tests := []struct {
		name     string
		tools    []Tool
		msgs     []Message
		wantCall string // name(arguments), empty for an answer
		wantText string
	}{
		{name: "a JSON object after the name", tools: []Tool{clock}, msgs: []Message{user(`Use current_time {"timezone": "Asia/Tokyo"} please`)},
			wantCall: `current_time({"timezone":"Asia/Tokyo"})`},
		{name: "the label names the tool; name=value pairs", tools: []Tool{clock}, msgs: []Message{user(`What does Current Time say? timezone=Europe/Berlin, format: "%H"`)},
			wantCall: `current_time({"format":"%H","timezone":"Europe/Berlin"})`},
		{name: "numbers are converted", tools: []Tool{add}, msgs: []Message{user("please add a=2, b: 3.5")},
			wantCall: `add({"a":2,"b":3.5})`},
		{name: "one parameter takes the text after the mention", tools: []Tool{stats}, msgs: []Message{user("text stats: hello big world")},
			wantCall: `text_stats({"text":"hello big world"})`},
		{name: "a tool named nowhere is not called", tools: []Tool{clock}, msgs: []Message{user("hello")},
			wantText: builtinIntro + ` You said: "hello"`},
		{name: "the second named tool follows the first", tools: []Tool{clock, stats},
			msgs: []Message{user(`text_stats {"text": "a b"} then current_time {}`),
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "text_stats", Arguments: `{}`}}},
				{Role: RoleTool, ToolCallID: "1", Name: "text_stats", Content: "3 characters"}},
			wantCall: `current_time({})`},
		{name: "after the calls the observations answer", tools: []Tool{clock, stats},
			msgs: []Message{user(`text_stats then current_time`),
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "text_stats"}}},
				{Role: RoleTool, ToolCallID: "1", Name: "text_stats", Content: "3 characters"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "2", Name: "current_time"}}},
				{Role: RoleTool, ToolCallID: "2", Name: "current_time", Content: "noon"}},
			wantText: "text_stats: 3 characters\ncurrent_time: noon"},
		{name: "one observation is the answer", tools: []Tool{clock},
			msgs: []Message{user(`current_time`),
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "current_time"}}},
				{Role: RoleTool, ToolCallID: "1", Name: "current_time", Content: "noon"}},
			wantText: "noon"},
	}
	m := &builtinChat{model: "builtin"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				req := ChatRequest{Messages: tc.msgs, Tools: tc.tools}
				var resp *ChatResponse
				var err error
				if stream {
					resp, err = m.Stream(context.Background(), req, nil)
				} else {
					resp, err = m.Chat(context.Background(), req)
				}
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				for _, c := range resp.ToolCalls {
					got += c.Name + "(" + c.Arguments + ")"
				}
				if got != tc.wantCall {
					t.Errorf("stream=%v call %q, want %q", stream, got, tc.wantCall)
				}
				if tc.wantCall == "" && resp.Content != tc.wantText {
					t.Errorf("stream=%v answer %q, want %q", stream, resp.Content, tc.wantText)
				}
			}
		})
	}
}

func TestBuiltinToolArgumentsFallback(t *testing.T) {
	optional := Tool{Name: "current_time", Parameters: map[string]any{"type": "object", "properties": map[string]any{"format": map[string]any{"type": "string"}}}}
	required := Tool{Name: "shout", Parameters: map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{"text": map[string]any{"type": "string"}}}}
	for _, tc := range []struct {
		tool     Tool
		question string
		want     string
	}{
		{optional, "tell the current time", `{}`},
		{required, "please shout", `{"text":"please shout"}`},
		{required, "shout: hey you", `{"text":"hey you"}`},
	} {
		call, _, _ := builtinToolTurn(ChatRequest{Tools: []Tool{tc.tool}, Messages: []Message{{Role: RoleUser, Content: tc.question}}})
		if call == nil || call.Arguments != tc.want {
			t.Errorf("%q: call %+v, want arguments %s", tc.question, call, tc.want)
		}
	}
}
