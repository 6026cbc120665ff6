package apps_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

const testdataDir = "../../testdata/apps"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, data []byte) *apps.Definition {
	t.Helper()
	def, err := apps.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestTestdataFiles imports every example file, plain and as a package, and
// checks that the export gives back the file and parses to the same thing.
func TestTestdataFiles(t *testing.T) {
	want := map[string]struct{ mode, name, version string }{
		"completion.yml":              {"completion", "Product copywriter", "0.3.0"},
		"chat.yml":                    {"chat", "Travel concierge", "0.1.5"},
		"agent-chat.yml":              {"agent-chat", "Research assistant", "0.3.0"},
		"advanced-chat.yml":           {"advanced-chat", "Support desk", "0.4.0"},
		"workflow.yml":                {"workflow", "Invoice normaliser", "0.3.0"},
		"agent.yml":                   {"agent", "Onboarding buddy", "0.7.0"},
		"legacy-chatflow-0.1.0.yml":   {"advanced-chat", "Manual helper (old export)", "0.1.0"},
		"legacy-chat-unversioned.yml": {"chat", "Cat facts", "0.1.0"},
	}
	files, err := filepath.Glob(filepath.Join(testdataDir, "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Fatalf("testdata has %d files, the table %d", len(files), len(want))
	}
	modes := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		exp, ok := want[name]
		if !ok {
			t.Fatalf("no expectation for %s", name)
		}
		modes[exp.mode] = true
		for _, packed := range []bool{false, true} {
			t.Run(name+map[bool]string{false: " as YAML", true: " as package"}[packed], func(t *testing.T) {
				ctx := context.Background()
				text := readTestdata(t, name)
				data := text
				if packed {
					var err error
					if data, err = apps.Pack(text); err != nil {
						t.Fatal(err)
					}
				}
				store := apps.NewStore(db.OpenTemp(t))
				app, err := store.Import(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				if app.Mode != exp.mode || app.Name != exp.name {
					t.Errorf("stored mode %q name %q, want %q %q", app.Mode, app.Name, exp.mode, exp.name)
				}
				exported, err := store.Export(ctx, app.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(exported, text) {
					t.Errorf("export differs from the imported definition")
				}
				def := mustParse(t, data)
				if def.Version != exp.version || def.Kind != "app" {
					t.Errorf("version %q kind %q", def.Version, def.Kind)
				}
				again, err := store.Import(ctx, exported)
				if err != nil {
					t.Fatal(err)
				}
				_, reparsed, err := store.Load(ctx, again.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(def, reparsed) {
					t.Errorf("re-importing the export gives a different definition")
				}
				// Whatever the file, the four information answers must be
				// writable as JSON.
				for _, v := range []any{apps.Info(app), apps.ParametersFor(def, apps.DefaultSystemParameters), apps.MetaFor(def), apps.SiteFor(app, def)} {
					if _, err := json.Marshal(v); err != nil {
						t.Errorf("%T: %v", v, err)
					}
				}
			})
		}
	}
	for _, m := range apps.Modes {
		if !modes[m] {
			t.Errorf("no testdata file for mode %s", m)
		}
	}
}

func TestImportRejects(t *testing.T) {
	chat := readTestdata(t, "chat.yml")
	pkg := func(members map[string]string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		names := make([]string, 0, len(members))
		for n := range members {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			w, _ := zw.Create(n)
			_, _ = w.Write([]byte(members[n]))
		}
		_ = zw.Close()
		return buf.Bytes()
	}
	sum := sha256.Sum256(chat)
	manifest := "format: dify.app\nformat_version: 1\napps:\n- path: app.yaml\n  sha256: " + hex.EncodeToString(sum[:]) + "\n"

	tests := []struct {
		name    string
		file    []byte
		wantErr string // part of the message
	}{
		{"not YAML", []byte("app: [unclosed"), "not valid YAML"},
		{"tab-indented YAML", []byte("app:\n\tname: x\n"), "not valid YAML"},
		{"empty file", nil, "empty"},
		{"a list at the top", []byte("- a\n- b\n"), "mapping"},
		{"no app section", []byte("kind: app\nversion: 0.1.5\n"), "no `app` section"},
		{"app section that is a list", []byte("app: [1]\n"), "`app` must be a mapping"},
		{"no mode", []byte("app: {name: X}\nmodel_config: {model: {}}\n"), "app.mode"},
		{"unknown mode", []byte("app: {name: X, mode: chatbot}\n"), `"chatbot"`},
		{"no name", []byte("app: {mode: chat}\nmodel_config: {model: {}}\n"), "app.name"},
		{"chat without model_config", []byte("app: {name: X, mode: chat}\n"), "a chat app needs a `model_config` section"},
		{"completion with an empty model_config", []byte("app: {name: X, mode: completion}\nmodel_config: {}\n"), "a completion app needs a `model_config`"},
		{"agent-chat with a null model_config", []byte("app: {name: X, mode: agent-chat}\nmodel_config:\n"), "a agent-chat app needs a `model_config`"},
		{"chat with a workflow instead", []byte("app: {name: X, mode: chat}\nworkflow: {graph: {nodes: []}}\n"), "`model_config`"},
		{"workflow without workflow", []byte("app: {name: X, mode: workflow}\nmodel_config: {model: {}}\n"), "a workflow app needs a `workflow` section"},
		{"advanced-chat with an empty workflow", []byte("app: {name: X, mode: advanced-chat}\nworkflow: {}\n"), "a advanced-chat app needs a `workflow`"},
		{"model_config that is text", []byte("app: {name: X, mode: chat}\nmodel_config: hello\n"), "`model_config` must be a mapping"},
		{"DSL major version 1", []byte("version: 1.0.0\napp: {name: X, mode: chat}\nmodel_config: {model: {}}\n"), "not supported"},
		{"version that is not a number", []byte("version: latest\napp: {name: X, mode: chat}\nmodel_config: {model: {}}\n"), `"latest"`},
		{"knowledge pipeline export", []byte("kind: rag_pipeline\nrag_pipeline: {name: P}\n"), "knowledge pipeline"},
		{"nodes that are not a list", []byte("app: {name: X, mode: workflow}\nworkflow: {graph: {nodes: 3}}\n"), "line 2"},
		{"form item without a kind", []byte("app: {name: X, mode: chat}\nmodel_config:\n  user_input_form:\n  - just text\n"), "line 4"},
		{"form item without a variable", []byte("app: {name: X, mode: chat}\nmodel_config:\n  user_input_form:\n  - text-input: {label: A}\n"), "no variable"},
		{"mapping key that is a list", []byte("app: {name: X, mode: chat}\n? [a, b]\n: 1\n"), "not plain text"},
		{"package without manifest", pkg(map[string]string{"app.yaml": string(chat)}), "no manifest.yaml"},
		{"package with a wrong checksum", pkg(map[string]string{"manifest.yaml": strings.Replace(manifest, "sha256: ", "sha256: 00", 1), "app.yaml": string(chat)}), "sha256"},
		{"package with a changed app.yaml", pkg(map[string]string{"manifest.yaml": manifest, "app.yaml": string(chat) + "\n"}), "does not match"},
		{"package with an extra member", pkg(map[string]string{"manifest.yaml": manifest, "app.yaml": string(chat), "evil.sh": "rm"}), `"evil.sh"`},
		{"package of another format", pkg(map[string]string{"manifest.yaml": strings.Replace(manifest, "dify.app", "dify.plugin", 1), "app.yaml": string(chat)}), "format"},
		{"package without app.yaml", pkg(map[string]string{"manifest.yaml": manifest}), `no "app.yaml"`},
		{"package that is a broken zip", []byte("PK\x03\x04garbage"), "zip"},
		{"package holding a bad definition", mustPack(t, []byte("app: {name: X}\n")), "app.mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gdb := db.OpenTemp(t)
			_, err := apps.NewStore(gdb).Import(context.Background(), tc.file)
			if !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want invalid_param mentioning %q", err, tc.wantErr)
			}
			var n int64
			gdb.Model(&models.App{}).Count(&n)
			if n != 0 {
				t.Errorf("a failed import created %d apps", n)
			}
		})
	}
}

func mustPack(t testing.TB, text []byte) []byte {
	t.Helper()
	b, err := apps.Pack(text)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseNormalizes checks that the spellings and layouts older files use
// come out the same as the current ones.
func TestParseNormalizes(t *testing.T) {
	tests := []struct {
		name  string
		file  []byte
		check func(t *testing.T, d *apps.Definition)
	}{
		{"no version means 0.1.0 and kind becomes app", []byte("kind: other\napp: {name: X, mode: chat}\nmodel_config: {model: {}}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.Version != "0.1.0" || d.Kind != "app" {
					t.Errorf("version %q kind %q", d.Version, d.Kind)
				}
			}},
		{"a version written as a YAML number", []byte("version: 0.1\napp: {name: X, mode: chat}\nmodel_config: {model: {}}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.Version != "0.1" {
					t.Errorf("version %q", d.Version)
				}
			}},
		{"icon defaults", []byte("app: {name: X, mode: chat, icon_type: sticker}\nmodel_config: {model: {}}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.App.IconType != "emoji" || d.App.IconBackground != "#FFFFFF" {
					t.Errorf("icon type %q background %q", d.App.IconType, d.App.IconBackground)
				}
			}},
		{"a chat app with its agent loop on is agent-chat", []byte("app: {name: X, mode: chat}\nmodel_config:\n  agent_mode: {enabled: true, strategy: cot, tools: []}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.App.Mode != "agent-chat" || d.ModelConfig.AgentMode.Strategy != "react" {
					t.Errorf("mode %q strategy %q", d.App.Mode, d.ModelConfig.AgentMode.Strategy)
				}
				if d.ModelConfig.AgentMode.MaxIterations() != apps.DefaultMaxIterations {
					t.Errorf("max iterations %d", d.ModelConfig.AgentMode.MaxIterations())
				}
			}},
		{"a chat app with legacy dataset routing stays chat", []byte("app: {name: X, mode: chat}\nmodel_config:\n  agent_mode: {enabled: true, strategy: router}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.App.Mode != "chat" {
					t.Errorf("mode %q", d.App.Mode)
				}
			}},
		{"reranking_enabled and reranking_enable", readTestdata(t, "completion.yml"),
			func(t *testing.T, d *apps.Definition) {
				dc := d.ModelConfig.DatasetConfigs
				if dc.RerankingEnabled == nil || !*dc.RerankingEnabled || dc.Extra["reranking_enabled"] != nil {
					t.Errorf("reranking %v, extra %v", dc.RerankingEnabled, dc.Extra)
				}
				if len(dc.Datasets.Datasets) != 1 || !dc.Datasets.Datasets[0].Enabled || dc.Datasets.Datasets[0].ID == "" {
					t.Errorf("datasets %+v", dc.Datasets.Datasets)
				}
				if d.ModelConfig.Model.ProviderName() != "openai" {
					t.Errorf("provider %q", d.ModelConfig.Model.ProviderName())
				}
			}},
		{"moderation settings under config", readTestdata(t, "completion.yml"),
			func(t *testing.T, d *apps.Definition) {
				m := d.ModelConfig.SensitiveWordAvoidance
				if m == nil || !m.Enabled || m.Type != "keywords" || m.Config["keywords"] == nil || len(m.Extra) != 0 {
					t.Errorf("moderation %+v", m)
				}
			}},
		{"moderation written with configs: []", readTestdata(t, "legacy-chat-unversioned.yml"),
			func(t *testing.T, d *apps.Definition) {
				m := d.ModelConfig.SensitiveWordAvoidance
				if m == nil || m.Enabled || m.Config != nil || len(m.Extra) != 0 {
					t.Errorf("moderation %+v", m)
				}
				if d.ModelConfig.PromptType != "simple" {
					t.Errorf("prompt type %q", d.ModelConfig.PromptType)
				}
				f := d.ModelConfig.UserInputForm
				if len(f) != 1 || f[0].MaxLength == nil || *f[0].MaxLength != 32 {
					t.Errorf("form %+v", f)
				}
			}},
		{"moderation settings written under configs", []byte("app: {name: X, mode: chat}\nmodel_config:\n  sensitive_word_avoidance: {enabled: true, type: api, configs: {api_based_extension_id: e1}}\n"),
			func(t *testing.T, d *apps.Definition) {
				if m := d.ModelConfig.SensitiveWordAvoidance; m.Config["api_based_extension_id"] != "e1" {
					t.Errorf("moderation %+v", m)
				}
			}},
		{"an enabled image-only upload becomes an image upload", readTestdata(t, "legacy-chatflow-0.1.0.yml"),
			func(t *testing.T, d *apps.Definition) {
				u := d.Workflow.Features.FileUpload
				if u.Enabled == nil || !*u.Enabled || !slices.Equal(u.AllowedFileTypes, []string{"image"}) ||
					!slices.Equal(u.AllowedFileUploadMethods, []string{"remote_url"}) || u.NumberLimits == nil || *u.NumberLimits != 2 {
					t.Errorf("upload %+v", u)
				}
			}},
		{"a disabled image-only upload stays off", readTestdata(t, "legacy-chat-unversioned.yml"),
			func(t *testing.T, d *apps.Definition) {
				u := d.ModelConfig.FileUpload
				if u.Enabled == nil || *u.Enabled || len(u.AllowedFileTypes) != 0 {
					t.Errorf("upload %+v", u)
				}
			}},
		{"edges without a handle use source", readTestdata(t, "legacy-chatflow-0.1.0.yml"),
			func(t *testing.T, d *apps.Definition) {
				if e := d.Workflow.Graph.Edges[0]; e.SourceHandle != "source" {
					t.Errorf("edge %+v", e)
				}
			}},
		{"unknown keys are kept", []byte("zz: 1\napp: {name: X, mode: workflow, yy: [1]}\nworkflow:\n  graph: {nodes: [{id: n, data: {type: start, custom_field: {7: seven}}}], xx: true}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.Extra["zz"] != 1 || d.App.Extra["yy"] == nil || d.Workflow.Graph.Extra["xx"] != true {
					t.Errorf("extras %v %v %v", d.Extra, d.App.Extra, d.Workflow.Graph.Extra)
				}
				inner, _ := d.Workflow.Graph.Nodes[0].Data["custom_field"].(map[string]any)
				if inner["7"] != "seven" {
					t.Errorf("node data %v", d.Workflow.Graph.Nodes[0].Data)
				}
			}},
		{"node ids written as numbers", []byte("app: {name: X, mode: workflow}\nworkflow:\n  graph:\n    nodes: [{id: 1718000000001, data: {type: start}}]\n    edges: [{source: 1718000000001, target: 2}]\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.Workflow.Graph.Nodes[0].ID != "1718000000001" || d.Workflow.Graph.Edges[0].Target != "2" {
					t.Errorf("graph %+v", d.Workflow.Graph)
				}
			}},
		{"a not-a-number float stays text", []byte("app: {name: X, mode: chat}\nmodel_config:\n  model: {completion_params: {temperature: .nan}}\n"),
			func(t *testing.T, d *apps.Definition) {
				if d.ModelConfig.Model.CompletionParams["temperature"] != ".nan" {
					t.Errorf("params %v", d.ModelConfig.Model.CompletionParams)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustParse(t, tc.file))
		})
	}
}

func TestNodes(t *testing.T) {
	def := mustParse(t, readTestdata(t, "legacy-chatflow-0.1.0.yml"))
	byID := map[string]apps.Node{}
	for _, n := range def.Workflow.Graph.Nodes {
		byID[n.ID] = n
	}
	tests := []struct {
		id       string
		wantKind string
		check    func(t *testing.T, original, normalized map[string]any)
	}{
		{"1700000000002", "question-classifier", func(t *testing.T, o, n map[string]any) {
			if n["instruction"] != "Decide whether the user asks about the product." || n["instructions"] != nil || o["instructions"] == nil {
				t.Errorf("normalized %v", n)
			}
		}},
		{"1700000000003", "knowledge-retrieval", func(t *testing.T, o, n map[string]any) {
			cfg := n["multiple_retrieval_config"].(map[string]any)
			orig := o["multiple_retrieval_config"].(map[string]any)
			if cfg["reranking_enable"] != true || cfg["reranking_enabled"] != nil || orig["reranking_enabled"] != true {
				t.Errorf("normalized %v, original %v", cfg, orig)
			}
		}},
		{"1700000000004", "if-else", func(t *testing.T, o, n map[string]any) {
			cases, _ := n["cases"].([]any)
			if len(cases) != 1 || n["conditions"] != nil || o["conditions"] == nil {
				t.Fatalf("normalized %v", n)
			}
			c := cases[0].(map[string]any)
			if c["case_id"] != "true" || c["logical_operator"] != "and" || len(c["conditions"].([]any)) != 1 {
				t.Errorf("case %v", c)
			}
		}},
		{"1700000000005", "llm", func(t *testing.T, o, n map[string]any) {
			if _, ok := n["structured_output_switch_on"]; !ok || n["structured_output_enabled"] != nil {
				t.Errorf("normalized %v", n)
			}
		}},
		{"1700000000006", "variable-aggregator", func(t *testing.T, o, n map[string]any) {
			if n["type"] != "variable-aggregator" || o["type"] != "variable-assigner" {
				t.Errorf("type %v / %v", n["type"], o["type"])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.wantKind, func(t *testing.T) {
			n := byID[tc.id]
			if n.Kind() != tc.wantKind {
				t.Fatalf("kind %q", n.Kind())
			}
			tc.check(t, n.Data, n.NormalizedData())
		})
	}

	chatflow := mustParse(t, readTestdata(t, "advanced-chat.yml"))
	if got := len(chatflow.Workflow.NodesOfKind("answer")); got != 3 {
		t.Errorf("%d answer nodes", got)
	}
	for _, n := range chatflow.Workflow.Graph.Nodes {
		if n.ID == "1718000000099" && (!n.IsNote() || n.Kind() != "") {
			t.Errorf("the canvas note is not a note: %+v", n)
		}
	}
	if start := chatflow.Workflow.StartNode(); start == nil || start.Title() != "Start" {
		t.Errorf("start node %+v", start)
	}
}

func TestReplace(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	store, keys := apps.NewStore(gdb), apikeys.NewStore(gdb)
	chat, err := store.Import(ctx, readTestdata(t, "chat.yml"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.CreateAppKey(ctx, chat.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	original, _ := store.Export(ctx, chat.ID)
	reader := apps.NewStore(gdb)

	tests := []struct {
		name     string
		appID    string
		file     []byte
		wantCode string
		wantName string // after the call
	}{
		{"a broken file changes nothing", chat.ID, []byte("app: [oops"), apperr.CodeInvalidParam, "Travel concierge"},
		{"a file of another mode changes nothing", chat.ID, readTestdata(t, "workflow.yml"), apperr.CodeInvalidParam, "Travel concierge"},
		{"an unknown app", "00000000-0000-0000-0000-000000000000", readTestdata(t, "chat.yml"), apperr.CodeNotFound, "Travel concierge"},
		{"a chat app may become agent-chat", chat.ID, readTestdata(t, "agent-chat.yml"), "", "Research assistant"},
		{"and back to chat", chat.ID, readTestdata(t, "legacy-chat-unversioned.yml"), "", "Cat facts"},
		{"from a package", chat.ID, mustPack(t, readTestdata(t, "chat.yml")), "", "Travel concierge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app, err := store.Replace(ctx, tc.appID, tc.file)
			if tc.wantCode != "" {
				if !apperr.Is(err, tc.wantCode) {
					t.Fatalf("err = %v, want %s", err, tc.wantCode)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if app.ID != chat.ID {
					t.Errorf("id changed to %s", app.ID)
				}
			}
			got, err := store.Get(ctx, chat.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.wantName {
				t.Errorf("name %q, want %q", got.Name, tc.wantName)
			}
			// Another store (as in another replica) sees the change at
			// once, and parses the definition once for as long as it holds.
			_, def, err := reader.Load(ctx, chat.ID)
			if err != nil {
				t.Fatal(err)
			}
			if def.App.Name != tc.wantName {
				t.Errorf("cached definition of %q, want %q", def.App.Name, tc.wantName)
			}
			if _, again, _ := reader.Load(ctx, chat.ID); again != def {
				t.Error("the definition was parsed again although the app did not change")
			}
			p, err := keys.Authenticate(ctx, key)
			if err != nil || p.AppID != chat.ID {
				t.Errorf("the app key stopped working: %v", err)
			}
			var n int64
			gdb.Model(&models.App{}).Count(&n)
			if n != 1 {
				t.Errorf("%d apps", n)
			}
		})
	}
	exported, _ := store.Export(ctx, chat.ID)
	if !bytes.Equal(exported, original) {
		t.Error("after replacing with the same file, the export differs")
	}
}

func TestLoadUnreadableDefinition(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	store := apps.NewStore(gdb)
	app, err := store.Import(ctx, readTestdata(t, "chat.yml"))
	if err != nil {
		t.Fatal(err)
	}
	gdb.Model(&models.App{}).Where("id = ?", app.ID).Update("definition", "not: [yaml")
	if _, _, err := store.Load(ctx, app.ID); !apperr.Is(err, apperr.CodeAppUnavailable) {
		t.Errorf("err = %v, want app_unavailable", err)
	}
	if _, _, err := store.Load(ctx, "missing"); !apperr.Is(err, apperr.CodeNotFound) {
		t.Errorf("err = %v, want not_found", err)
	}
}

// DefinitionOf parses the row a caller already holds once, sharing the
// parse with Load, and refuses a row whose stored definition is unreadable.
func TestDefinitionOf(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	store := apps.NewStore(gdb)
	imported, err := store.Import(ctx, readTestdata(t, "chat.yml"))
	if err != nil {
		t.Fatal(err)
	}
	app, loaded, err := store.Load(ctx, imported.ID)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		row      *models.App
		wantCode string
		same     bool // the very definition Load gave
	}{
		{"the cached row", app, "", true},
		{"a copy of the row", func() *models.App { c := *app; return &c }(), "", false},
		{"an unreadable row", &models.App{ID: app.ID, Mode: app.Mode, Definition: "not: [yaml"}, apperr.CodeAppUnavailable, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, err := store.DefinitionOf(tc.row)
			if tc.wantCode != "" {
				if !apperr.Is(err, tc.wantCode) {
					t.Fatalf("err = %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (def == loaded) != tc.same {
				t.Errorf("shared with Load = %v, want %v", def == loaded, tc.same)
			}
			if def.App.Mode != app.Mode || def.App.Name != loaded.App.Name {
				t.Errorf("definition %s/%q, want %s/%q", def.App.Mode, def.App.Name, app.Mode, loaded.App.Name)
			}
		})
	}
}

// formJSON renders the input form the way /parameters sends it.
func formJSON(t *testing.T, p apps.Parameters) string {
	t.Helper()
	b, err := json.Marshal(p.UserInputForm)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParametersFor(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, p apps.Parameters)
	}{
		{"completion.yml", func(t *testing.T, p apps.Parameters) {
			if !p.MoreLikeThis.Enabled || !p.SensitiveWordAvoidance.Enabled || !p.RetrieverResource.Enabled {
				t.Errorf("switches %+v", p)
			}
			if tts := p.TextToSpeech; !tts.Enabled || tts.Voice != "alloy" || tts.AutoPlay != "disabled" {
				t.Errorf("tts %+v", tts)
			}
			want := `[{"text-input":{"default":"","hide":false,"label":"Product","max_length":80,"required":true,"variable":"product"}},` +
				`{"paragraph":{"default":"","hide":false,"label":"Facts about the product","required":false,"variable":"facts"}},` +
				`{"select":{"default":"friendly","hide":false,"label":"Tone","options":["friendly","formal","playful"],"required":true,"variable":"tone"}},` +
				`{"text-input":{"hide":false,"label":"Audience","max_length":40,"required":false,"variable":"audience"}},` +
				`{"number":{"default":120,"hide":false,"label":"Words","required":false,"variable":"words"}}]`
			if got := formJSON(t, p); got != want {
				t.Errorf("form\n got %s\nwant %s", got, want)
			}
			if p.FileUpload.Enabled || !slices.Equal(p.FileUpload.AllowedFileUploadMethods, []string{"local_file"}) || p.FileUpload.NumberLimits != 1 {
				t.Errorf("upload %+v", p.FileUpload)
			}
		}},
		{"chat.yml", func(t *testing.T, p apps.Parameters) {
			if p.OpeningStatement != "Hi! Where would you like to go?" || len(p.SuggestedQuestions) != 2 {
				t.Errorf("opening %q %v", p.OpeningStatement, p.SuggestedQuestions)
			}
			if !p.SuggestedQuestionsAfterAnswer.Enabled || !p.SpeechToText.Enabled || !p.AnnotationReply.Enabled ||
				p.RetrieverResource.Enabled || p.SensitiveWordAvoidance.Enabled || p.MoreLikeThis.Enabled || p.TextToSpeech.Enabled {
				t.Errorf("switches %+v", p)
			}
			u := p.FileUpload
			if !u.Enabled || u.NumberLimits != 5 || !slices.Equal(u.AllowedFileTypes, []string{"image", "document"}) ||
				!u.Image.Enabled || u.Image.NumberLimits != 4 || u.Image.Detail != "low" || !slices.Equal(u.Image.TransferMethods, []string{"local_file"}) {
				t.Errorf("upload %+v", u)
			}
			want := `[{"select":{"hide":false,"label":"Traveller","options":["solo","family","business"],"required":true,"variable":"traveller"}},` +
				`{"external_data_tool":{"config":{"api_based_extension_id":"9f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"},"enabled":true,"hide":false,"label":"Budget","required":false,"type":"api","variable":"budget"}}]`
			if got := formJSON(t, p); got != want {
				t.Errorf("form\n got %s\nwant %s", got, want)
			}
		}},
		{"agent-chat.yml", func(t *testing.T, p apps.Parameters) {
			if !p.RetrieverResource.Enabled || len(p.UserInputForm) != 0 || p.UserInputForm == nil {
				t.Errorf("parameters %+v", p)
			}
			if u := p.FileUpload; u.Enabled || u.Image.Enabled || u.Image.NumberLimits != 3 {
				t.Errorf("upload %+v", u)
			}
		}},
		{"advanced-chat.yml", func(t *testing.T, p apps.Parameters) {
			if p.OpeningStatement != "Hello {{customer_name}}, how can we help today?" || !p.RetrieverResource.Enabled ||
				!p.SuggestedQuestionsAfterAnswer.Enabled || p.SpeechToText.Enabled || p.MoreLikeThis.Enabled {
				t.Errorf("parameters %+v", p)
			}
			if tts := p.TextToSpeech; !tts.Enabled || tts.AutoPlay != "enabled" || tts.Voice != "nova" {
				t.Errorf("tts %+v", tts)
			}
			u := p.FileUpload
			if !u.Enabled || u.NumberLimits != 2 || !u.Image.Enabled || u.Image.NumberLimits != 2 || !slices.Equal(u.Image.TransferMethods, []string{"local_file"}) {
				t.Errorf("upload %+v", u)
			}
			want := `[{"text-input":{"hide":false,"label":"Your name","max_length":48,"required":false,"variable":"customer_name"}},` +
				`{"select":{"default":"free","hide":false,"label":"Plan","options":["free","pro","enterprise"],"required":true,"variable":"plan"}},` +
				`{"file":{"allowed_file_extensions":[],"allowed_file_types":["document","image"],"allowed_file_upload_methods":["local_file","remote_url"],"hide":false,"label":"Screenshot or invoice","required":false,"variable":"attachment"}},` +
				`{"checkbox":{"default":false,"hide":false,"label":"Urgent","required":false,"variable":"urgent"}}]`
			if got := formJSON(t, p); got != want {
				t.Errorf("form\n got %s\nwant %s", got, want)
			}
		}},
		{"workflow.yml", func(t *testing.T, p apps.Parameters) {
			if p.RetrieverResource.Enabled || p.FileUpload.Enabled || p.OpeningStatement != "" {
				t.Errorf("parameters %+v", p)
			}
			want := `[{"paragraph":{"hide":false,"label":"Invoice text","max_length":20000,"required":true,"variable":"invoice_text"}},` +
				`{"number":{"default":"19","hide":false,"label":"VAT rate (%)","required":false,"variable":"vat_rate"}},` +
				`{"file-list":{"allowed_file_extensions":[".PDF",".XML"],"allowed_file_types":["document","custom"],"allowed_file_upload_methods":["local_file"],"hide":false,"label":"Attachments","max_length":5,"required":false,"variable":"attachments"}},` +
				`{"json_object":{"hide":false,"json_schema":"{\"type\":\"object\",\"properties\":{\"vendor\":{\"type\":\"string\"}}}","label":"Hints","required":false,"variable":"hints"}},` +
				`{"select":{"hide":false,"label":"Output currency","options":["EUR","USD","GBP"],"required":true,"variable":"currency"}},` +
				`{"checkbox":{"default":true,"hide":true,"label":"Strict mode","required":false,"variable":"strict"}}]`
			if got := formJSON(t, p); got != want {
				t.Errorf("form\n got %s\nwant %s", got, want)
			}
		}},
		{"agent.yml", func(t *testing.T, p apps.Parameters) {
			if p.OpeningStatement != "Welcome aboard! What would you like to know?" || len(p.SuggestedQuestions) != 2 || !p.FileUpload.Enabled {
				t.Errorf("parameters %+v", p)
			}
			if got := formJSON(t, p); got != `[{"text-input":{"hide":false,"label":"Team","required":true,"variable":"team"}}]` {
				t.Errorf("form %s", got)
			}
		}},
		{"legacy-chatflow-0.1.0.yml", func(t *testing.T, p apps.Parameters) {
			u := p.FileUpload
			if !u.Enabled || !slices.Equal(u.AllowedFileTypes, []string{"image"}) || !u.Image.Enabled || u.Image.NumberLimits != 2 {
				t.Errorf("upload %+v", u)
			}
			if len(p.UserInputForm) != 0 {
				t.Errorf("form %v", p.UserInputForm)
			}
		}},
		{"legacy-chat-unversioned.yml", func(t *testing.T, p apps.Parameters) {
			if !p.RetrieverResource.Enabled || p.TextToSpeech.Enabled || p.OpeningStatement != "Meow! Ask me about cats." {
				t.Errorf("parameters %+v", p)
			}
			if got := formJSON(t, p); got != `[{"text-input":{"hide":false,"label":"Name","max_length":32,"required":false,"variable":"name"}}]` {
				t.Errorf("form %s", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			p := apps.ParametersFor(mustParse(t, readTestdata(t, tc.file)), apps.DefaultSystemParameters)
			if p.SystemParameters != apps.DefaultSystemParameters {
				t.Errorf("system parameters %+v", p.SystemParameters)
			}
			if p.SuggestedQuestions == nil || p.UserInputForm == nil {
				t.Error("lists must be empty, not null")
			}
			tc.check(t, p)
		})
	}
}

func TestFormItems(t *testing.T) {
	tests := []struct {
		name  string
		field apps.FormField
		want  string // JSON; "" when the field is left out
	}{
		{"unknown kind is left out", apps.FormField{Kind: "date", Variable: "d"}, ""},
		{"field without a variable is left out", apps.FormField{Kind: "text-input", Label: "x"}, ""},
		{"label falls back to the variable", apps.FormField{Kind: "paragraph", Variable: "p"},
			`{"paragraph":{"hide":false,"label":"p","required":false,"variable":"p"}}`},
		{"numeric text default becomes text", apps.FormField{Kind: "text-input", Variable: "v", Default: 42},
			`{"text-input":{"default":"42","hide":false,"label":"v","required":false,"variable":"v"}}`},
		{"select without options gets an empty list", apps.FormField{Kind: "select", Variable: "s"},
			`{"select":{"hide":false,"label":"s","options":[],"required":false,"variable":"s"}}`},
		{"checkbox default written as text", apps.FormField{Kind: "checkbox", Variable: "c", Default: "true"},
			`{"checkbox":{"default":true,"hide":false,"label":"c","required":false,"variable":"c"}}`},
		{"checkbox default that is no boolean is dropped", apps.FormField{Kind: "checkbox", Variable: "c", Default: "maybe"},
			`{"checkbox":{"hide":false,"label":"c","required":false,"variable":"c"}}`},
		{"number default that is empty text is dropped", apps.FormField{Kind: "number", Variable: "n", Default: ""},
			`{"number":{"hide":false,"label":"n","required":false,"variable":"n"}}`},
		{"json default with numeric keys", apps.FormField{Kind: "json_object", Variable: "j", Default: map[any]any{1: "a"}},
			`{"json_object":{"default":{"1":"a"},"hide":false,"label":"j","required":false,"variable":"j"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			item, ok := tc.field.Item()
			if tc.want == "" {
				if ok {
					t.Errorf("got %v, want the field left out", item)
				}
				return
			}
			b, err := json.Marshal(item)
			if err != nil || string(b) != tc.want {
				t.Errorf("got %s (%v)\nwant %s", b, err, tc.want)
			}
		})
	}
}

func TestMetaFor(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"agent-chat.yml", `{"tool_icons":{"search_wiki":{"background":"#FFEAD5","content":"📚"},"tavily_search":"https://icons.example.com/tavily.svg"}}`},
		{"workflow.yml", `{"tool_icons":{"convert_currency":{"background":"#E4FBCC","content":"💱"}}}`},
		{"agent.yml", `{"tool_icons":{"book_meeting":{"background":"#252525","content":"📅"}}}`},
		{"chat.yml", `{"tool_icons":{}}`},
		{"advanced-chat.yml", `{"tool_icons":{}}`},
		{"completion.yml", `{"tool_icons":{}}`},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			b, err := json.Marshal(apps.MetaFor(mustParse(t, readTestdata(t, tc.file))))
			if err != nil || string(b) != tc.want {
				t.Errorf("got %s (%v)\nwant %s", b, err, tc.want)
			}
		})
	}
	// Tools inside agent nodes of a graph app.
	def := mustParse(t, []byte(`app: {name: X, mode: workflow}
workflow:
  graph:
    nodes:
    - id: a
      data:
        type: agent
        agent_parameters:
          tools:
            type: constant
            value:
            - {tool_name: fetch, provider_name: web, icon: "https://x.example/fetch.png"}
            - {tool_name: relative, icon: /console/api/icon}
            - {tool_name: named, icon: magnifier}
`))
	b, _ := json.Marshal(apps.MetaFor(def))
	if string(b) != `{"tool_icons":{"fetch":"https://x.example/fetch.png"}}` {
		t.Errorf("agent node tools: %s", b)
	}
}

func TestSiteFor(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, s apps.Site)
	}{
		{"chat.yml", func(t *testing.T, s apps.Site) {
			if s.Title != "Travel concierge" || s.Icon != "✈️" || s.IconType != "emoji" || s.IconBackground != "#D1E9FF" ||
				s.IconURL != nil || !s.UseIconAsAnswerIcon || s.Description != "Plans trips and answers travel questions." {
				t.Errorf("site %+v", s)
			}
		}},
		{"workflow.yml", func(t *testing.T, s apps.Site) {
			if s.IconType != "link" || s.IconURL == nil || *s.IconURL != "https://icons.example.com/invoice.png" || s.UseIconAsAnswerIcon {
				t.Errorf("site %+v", s)
			}
		}},
		{"legacy-chat-unversioned.yml", func(t *testing.T, s apps.Site) {
			if s.DefaultLanguage != "en-US" || !s.ShowWorkflowSteps || s.ChatColorTheme != nil || s.CustomDisclaimer != "" || s.IconType != "emoji" {
				t.Errorf("site %+v", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ctx := context.Background()
			store := apps.NewStore(db.OpenTemp(t))
			imported, err := store.Import(ctx, readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			app, def, err := store.Load(ctx, imported.ID)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, apps.SiteFor(app, def))
			if info := apps.Info(app); info.Name != app.Name || info.Mode != app.Mode || info.Tags == nil {
				t.Errorf("info %+v", info)
			}
		})
	}
}

// FuzzParse checks that no input makes the parser panic, that everything it
// accepts obeys the rules it enforces, and that the information answers for
// an accepted definition can always be computed and written as JSON.
func FuzzParse(f *testing.F) {
	f.Add([]byte("app: {name: a, mode: chat}\nmodel_config: {model: {}}\n"))
	f.Add([]byte("version: 0.1.5\nkind: app\napp:\n  name: W\n  mode: workflow\nworkflow: {graph: {}}\n"))
	f.Add([]byte("- 1\n"))
	f.Add([]byte("app: &a {name: *a}\n"))
	f.Add([]byte("app: {name: X, mode: chat}\nmodel_config:\n  user_input_form: [{select: {variable: v, options: [1, .nan]}}]\n"))
	files, _ := filepath.Glob(filepath.Join(testdataDir, "*.yml"))
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if len(files) > 0 {
		b, _ := os.ReadFile(files[0])
		f.Add(mustPack(f, b))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := apps.Parse(data)
		if err != nil {
			if !apperr.Is(err, apperr.CodeInvalidParam) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		mode := def.App.Mode
		if strings.TrimSpace(def.App.Name) == "" || !slices.Contains(apps.Modes, mode) || def.Kind != "app" || !strings.HasPrefix(def.Version, "0") {
			t.Fatalf("accepted name %q mode %q kind %q version %q", def.App.Name, mode, def.Kind, def.Version)
		}
		if apps.UsesModelConfig(mode) && def.ModelConfig == nil || apps.UsesWorkflow(mode) && def.Workflow == nil {
			t.Fatalf("accepted a %s app without its configuration", mode)
		}
		app := &models.App{Name: def.App.Name, Mode: mode, Icon: def.App.Icon, IconType: def.App.IconType}
		for _, v := range []any{apps.ParametersFor(def, apps.DefaultSystemParameters), apps.MetaFor(def), apps.SiteFor(app, def)} {
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%T cannot be written as JSON: %v", v, err)
			}
		}
		if def.Workflow != nil {
			for _, n := range def.Workflow.Graph.Nodes {
				if _, err := json.Marshal(n.NormalizedData()); err != nil {
					t.Fatalf("node data cannot be written as JSON: %v", err)
				}
			}
		}
	})
}
