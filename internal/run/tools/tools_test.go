package tools

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// fixedClock makes the time tools see t as now until the test ends.
func fixedClock(t *testing.T, at time.Time) {
	t.Helper()
	old := Now
	Now = func() time.Time { return at }
	t.Cleanup(func() { Now = old })
}

// callTool runs one built-in tool the way a tool node does.
func callTool(t *testing.T, env *Env, provider, name string, args map[string]any) (*Output, error) {
	t.Helper()
	tool, err := (*Registry)(nil).Find(context.Background(), Ref{ProviderType: "builtin", Provider: provider, Name: name})
	if err != nil {
		t.Fatalf("no tool %s/%s: %v", provider, name, err)
	}
	prepared, err := tool.Prepare(args)
	if err != nil {
		return nil, err
	}
	return tool.Run(context.Background(), env, prepared)
}

func TestBuiltinTools(t *testing.T) {
	// A Tuesday, 13:04:05.123456 UTC.
	fixedClock(t, time.Date(2024, 3, 5, 13, 4, 5, 123456000, time.UTC))
	const doc = `{"name": "Ünal", "tags": ["a", "b"], "items": [{"id": 1, "price": 2.50}, {"id": 2, "price": 3}], "ok": true, "none": null}`
	tests := []struct {
		name           string
		provider, tool string
		args           map[string]any
		want           string // the text output
		wantErr        string
	}{
		{name: "current_time defaults to UTC", provider: "time", tool: "current_time", args: map[string]any{},
			want: "2024-03-05 13:04:05"},
		{name: "current_time in a zone with strftime directives", provider: "langgenius/time/time", tool: "current_time",
			args: map[string]any{"timezone": "Asia/Tokyo", "format": "%A %d %B %Y, %I:%M %p %Z (%z) day %j %%"},
			want: "Tuesday 05 March 2024, 10:04 PM JST (+0900) day 065 %"},
		{name: "current_time with a bad zone", provider: "time", tool: "current_time", args: map[string]any{"timezone": "Mars/Olympus"},
			wantErr: `unknown timezone "Mars/Olympus"`},
		{name: "current_time keeps unknown directives", provider: "time", tool: "current_time", args: map[string]any{"format": "%Q %f %y %a %b %e"},
			want: "%Q 123456 24 Tue Mar  5"},
		{name: "weekday", provider: "time", tool: "weekday", args: map[string]any{"year": 2024, "month": "2", "day": 29},
			want: "February 29, 2024 is Thursday."},
		{name: "weekday of the current year", provider: "time", tool: "weekday", args: map[string]any{"month": 1, "day": 1},
			want: "January 1, 2024 is Monday."},
		{name: "weekday of no date", provider: "time", tool: "weekday", args: map[string]any{"year": 2023, "month": 2, "day": 29},
			wantErr: "2023-2-29 is not a date"},
		{name: "weekday needs a month", provider: "time", tool: "weekday", args: map[string]any{"day": 3},
			wantErr: `the parameter "month" is required`},
		{name: "weekday refuses words for numbers", provider: "time", tool: "weekday", args: map[string]any{"month": "May", "day": 3},
			wantErr: `the parameter "month" must be a number, not "May"`},
		{name: "timezone conversion", provider: "time", tool: "timezone_conversion",
			args: map[string]any{"current_time": "2024-1-1 0:0:0", "current_timezone": "Asia/Shanghai", "target_timezone": "Europe/London"},
			want: "2023-12-31 16:00:00"},
		{name: "timezone conversion of a non-time", provider: "time", tool: "timezone_conversion",
			args:    map[string]any{"current_time": "soon", "current_timezone": "UTC", "target_timezone": "UTC"},
			wantErr: `"soon" is not a time`},
		{name: "timestamp to local time", provider: "time", tool: "timestamp_to_localtime",
			args: map[string]any{"timestamp": "1700000000", "timezone": "America/New_York"}, want: "2023-11-14 17:13:20"},
		{name: "local time to timestamp", provider: "time", tool: "localtime_to_timestamp",
			args: map[string]any{"localtime": "2023-11-14 17:13:20", "timezone": "America/New_York"}, want: "1700000000"},
		{name: "json parse picks a value", provider: "langgenius/json_process/json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$.items[1].price"}, want: "3"},
		{name: "json parse gives objects as Python writes them, non-ASCII escaped", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$"},
			want: `{"name": "\u00dcnal", "tags": ["a", "b"], "items": [{"id": 1, "price": 2.5}, {"id": 2, "price": 3}], "ok": true, "none": null}`},
		{name: "json parse writes floats as Python does", provider: "json_process", tool: "parse",
			args: map[string]any{"content": `[1e3, 0.00001, 1.5e20, -0.0]`, "json_filter": "$"}, want: "[1000.0, 1e-05, 1.5e+20, -0.0]"},
		{name: "json parse without ensure_ascii", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "name", "ensure_ascii": false}, want: "Ünal"},
		{name: "json parse of several matches gives a list", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$.items[*].id"}, want: "[1, 2]"},
		{name: "json parse of constants reads like Python", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$['ok']"}, want: "True"},
		{name: "json parse of null", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$.none"}, want: "None"},
		{name: "json parse of a negative index", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$.tags[-1]"}, want: "b"},
		{name: "json parse refuses recursive descent", provider: "json_process", tool: "parse",
			args: map[string]any{"content": doc, "json_filter": "$..id"}, wantErr: "recursive descent"},
		{name: "json parse of broken JSON", provider: "json_process", tool: "parse",
			args: map[string]any{"content": `{"a": `, "json_filter": "$.a"}, wantErr: "not valid JSON"},
		{name: "json replace of text inside values", provider: "json_process", tool: "json_replace",
			args: map[string]any{"content": `{"a": "cat hat", "b": "cat"}`, "query": "$.a", "replace_pattern": "at", "replace_value": "og"},
			want: `{"a": "cog hog", "b": "cat"}`},
		{name: "json replace of a key keeps its place", provider: "json_process", tool: "json_replace",
			args: map[string]any{"content": `{"a": 1, "b": 2, "c": 3}`, "query": "$.b", "replace_value": "z", "replace_model": "key"},
			want: `{"a": 1, "z": 2, "c": 3}`},
		{name: "json replace of values, decoded", provider: "json_process", tool: "json_replace",
			args: map[string]any{"content": `{"xs": [{"v": 1}, {"v": 2}]}`, "query": "$.xs[*].v", "replace_value": `{"n": 0}`, "replace_model": "value", "value_decode": true},
			want: `{"xs": [{"v": {"n": 0}}, {"v": {"n": 0}}]}`},
		{name: "json replace with an unknown mode", provider: "json_process", tool: "json_replace",
			args:    map[string]any{"content": `{}`, "query": "$.a", "replace_value": "x", "replace_model": "regex"},
			wantErr: `the parameter "replace_model" must be one of key, value, pattern, not "regex"`},
		{name: "json insert into an object and an array", provider: "json_process", tool: "json_insert",
			args: map[string]any{"content": `{"o": {"a": 1}, "l": [1, 3]}`, "query": "$.l", "new_value": "2", "index": 1},
			want: `{"o": {"a": 1}, "l": [1, 2, 3]}`},
		{name: "json insert merges objects", provider: "json_process", tool: "json_insert",
			args: map[string]any{"content": `{"o": {"a": 1}}`, "query": "o", "new_value": `{"b": "x"}`},
			want: `{"o": {"a": 1, "b": "x"}}`},
		{name: "json insert creates a path", provider: "json_process", tool: "json_insert",
			args: map[string]any{"content": `{}`, "query": "$.a.b", "new_value": "v", "create_path": true},
			want: `{"a": {"b": "v"}}`},
		{name: "json delete of array items and keys", provider: "json_process", tool: "json_delete",
			args: map[string]any{"content": `{"l": [1, 2, 3], "k": 1}`, "query": "$.l[*]"},
			want: `{"l": [], "k": 1}`},
		{name: "regex extract", provider: "regex", tool: "regex_extract",
			args: map[string]any{"content": "order 12 and 345", "expression": `\d+`}, want: `["12","345"]`},
		{name: "regex extract with one group", provider: "langgenius/regex/regex", tool: "regex_extract",
			args: map[string]any{"content": "a=1, b=2", "expression": `(\w)=\d`}, want: `["a","b"]`},
		{name: "regex extract with a bad expression", provider: "regex", tool: "regex_extract",
			args: map[string]any{"content": "x", "expression": `(`}, wantErr: "bad regular expression"},
		{name: "text replace", provider: "text", tool: "text_replace",
			args: map[string]any{"text": "a-b-c", "find": "-", "replace": "+"}, want: "a+b+c"},
		{name: "text replace with a regex", provider: "text", tool: "text_replace",
			args: map[string]any{"text": "2024-03-05", "find": `(\d+)-(\d+)-(\d+)`, "replace": "$3.$2.$1", "use_regex": "true"}, want: "05.03.2024"},
		{name: "text split", provider: "text", tool: "text_split",
			args: map[string]any{"text": " a, b ,,c ", "separator": ","}, want: "a\nb\nc"},
		{name: "text stats", provider: "text", tool: "text_stats",
			args: map[string]any{"text": "héllo wörld\nbye"}, want: "15 characters, 3 words, 2 lines"},
		{name: "knowledge search needs a retriever", provider: "knowledge", tool: "knowledge_search",
			args: map[string]any{"query": "q", "dataset_ids": "d1"}, wantErr: "not available on this server"},
		{name: "web scraper refuses other schemes", provider: "webscraper", tool: "webscraper",
			args: map[string]any{"url": "file:///etc/passwd"}, wantErr: "not an http or https URL"},
		{name: "web scraper refuses loopback by default", provider: "webscraper", tool: "webscraper",
			args: map[string]any{"url": "http://127.0.0.1:1/"}, wantErr: "may not be requested"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := callTool(t, &Env{}, tc.provider, tc.tool, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Text != tc.want {
				t.Errorf("text\n got %s\nwant %s", out.Text, tc.want)
			}
		})
	}
}

func TestFindTool(t *testing.T) {
	tests := []struct {
		providerType, provider, tool string
		found                        bool
	}{
		{"builtin", "time", "current_time", true},
		{"", "time", "current_time", true},
		{"plugin", "langgenius/json_process/json_process", "parse", true},
		{"builtin", "someone/time/time", "current_time", false},
		{"api", "time", "current_time", false},
		{"workflow", "time", "current_time", false},
		{"builtin", "time", "nope", false},
	}
	for _, tc := range tests {
		_, err := (*Registry)(nil).Find(context.Background(), Ref{ProviderType: tc.providerType, Provider: tc.provider, Name: tc.tool})
		if got := err == nil; got != tc.found {
			t.Errorf("findTool(%q, %q, %q) found %v, want %v", tc.providerType, tc.provider, tc.tool, got, tc.found)
		}
	}
}

func TestToolSchema(t *testing.T) {
	s := toolJSONReplace.Schema(map[string]any{"replace_pattern": "x"})
	props := s["properties"].(map[string]any)
	for _, name := range []string{"content", "query", "replace_value"} {
		if props[name] == nil {
			t.Errorf("schema lacks %s: %v", name, props)
		}
	}
	for _, name := range []string{"replace_pattern", "replace_model", "ensure_ascii"} {
		if props[name] != nil {
			t.Errorf("schema offers %s, which is fixed or a setting", name)
		}
	}
	if req := s["required"].([]any); len(req) != 3 {
		t.Errorf("required %v", req)
	}
	k := toolKnowledgeSearch.Schema(nil)["properties"].(map[string]any)
	if len(k) != 1 || k["query"] == nil {
		t.Errorf("knowledge search offers %v", k)
	}
}

// TestToolsDocumented keeps docs/tools.md in step with the built-in set:
// every tool has a heading and every parameter a row.
func TestToolsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for key, tool := range builtins {
		i := strings.Index(doc, "#### `"+key+"`")
		if i < 0 {
			t.Errorf("docs/tools.md has no heading for %s", key)
			continue
		}
		section := doc[i+1:]
		if j := strings.Index(section, "\n#"); j >= 0 {
			section = section[:j]
		}
		for _, p := range tool.Params {
			if !strings.Contains(section, "| `"+p.Name+"` |") {
				t.Errorf("docs/tools.md lists no parameter %s of %s", p.Name, key)
			}
			set := "| author |"
			if p.LLM {
				set = "| model |"
			}
			for line := range strings.SplitSeq(section, "\n") {
				if strings.HasPrefix(line, "| `"+p.Name+"` |") && !strings.HasSuffix(line, set) {
					t.Errorf("docs/tools.md: %s of %s should end with %q: %s", p.Name, key, set, line)
				}
			}
		}
	}
}
