package apps

import (
	"bytes"
	"errors"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"appkb/internal/platform/apperr"
)

// App modes.
const (
	ModeCompletion   = "completion"
	ModeChat         = "chat"
	ModeAgentChat    = "agent-chat"
	ModeAdvancedChat = "advanced-chat"
	ModeWorkflow     = "workflow"
	ModeAgent        = "agent"
)

// Modes lists the app modes an app definition may declare.
var Modes = []string{ModeCompletion, ModeChat, ModeAgentChat, ModeAdvancedChat, ModeWorkflow, ModeAgent}

// MaxDefinitionSize bounds an app definition file, as Dify does.
const MaxDefinitionSize = 10 << 20

// DefaultVersion is the DSL version of a file that declares none.
const DefaultVersion = "0.1.0"

// UsesModelConfig reports whether apps of the mode are configured by a
// model_config block (the "easy UI" modes).
func UsesModelConfig(mode string) bool {
	return mode == ModeCompletion || mode == ModeChat || mode == ModeAgentChat
}

// UsesWorkflow reports whether apps of the mode are configured by a graph.
func UsesWorkflow(mode string) bool {
	return mode == ModeWorkflow || mode == ModeAdvancedChat
}

// Parse reads an app definition: the DSL text of a Dify export, or an app
// package (.ifpkg) that holds it. Every failure is an invalid_param error
// whose message says what is wrong and, where it can, on which line.
func Parse(data []byte) (*Definition, error) {
	_, def, err := load(data)
	return def, err
}

// load unwraps a package when data is one, and parses the definition text.
func load(data []byte) ([]byte, *Definition, error) {
	text, err := Unpack(data)
	if err != nil {
		return nil, nil, err
	}
	def, err := parseText(text)
	if err != nil {
		return nil, nil, err
	}
	return text, def, nil
}

func parseText(data []byte) (*Definition, error) {
	if len(data) > MaxDefinitionSize {
		return nil, apperr.InvalidParam("app definition is larger than %d bytes", MaxDefinitionSize)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, apperr.InvalidParam("app definition is empty; expected a YAML document")
		}
		return nil, apperr.InvalidParam("app definition is not valid YAML: %s", yamlMessage(err))
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, apperr.InvalidParam("app definition must be a YAML mapping at the top level")
	}
	doc := root.Content[0]
	if err := prepare(doc); err != nil {
		return nil, err
	}
	if kind := scalarAt(doc, "kind"); kind == "rag_pipeline" {
		return nil, apperr.InvalidParam("this file is a knowledge pipeline export (kind: rag_pipeline), not an app")
	}
	for _, key := range []string{"app", "model_config", "workflow", "agent"} {
		if v := valueAt(doc, key); v != nil && v.Kind != yaml.MappingNode && v.ShortTag() != "!!null" {
			return nil, apperr.InvalidParam("`%s` must be a mapping (line %d)", key, v.Line)
		}
	}

	var def Definition
	if err := doc.Decode(&def); err != nil {
		return nil, apperr.InvalidParam("app definition has an unexpected shape: %s", yamlMessage(err))
	}
	if def.App == nil {
		return nil, apperr.InvalidParam("app definition has no `app` section")
	}
	if def.App.Mode == "" {
		return nil, apperr.InvalidParam("app definition has no `app.mode`; it must be one of %s", strings.Join(Modes, ", "))
	}
	if !slices.Contains(Modes, def.App.Mode) {
		return nil, apperr.InvalidParam("app.mode %q is not one of %s", def.App.Mode, strings.Join(Modes, ", "))
	}
	if strings.TrimSpace(def.App.Name) == "" {
		return nil, apperr.InvalidParam("app definition has no `app.name`")
	}
	version, err := checkVersion(def.Version)
	if err != nil {
		return nil, err
	}
	def.Version = version
	def.Kind = "app"

	mode := def.App.Mode
	switch {
	case UsesModelConfig(mode) && (def.ModelConfig == nil || emptyMapping(valueAt(doc, "model_config"))):
		return nil, apperr.InvalidParam("a %s app needs a `model_config` section, and this file has none", mode)
	case UsesWorkflow(mode) && (def.Workflow == nil || emptyMapping(valueAt(doc, "workflow"))):
		return nil, apperr.InvalidParam("a %s app needs a `workflow` section, and this file has none", mode)
	}
	normalize(&def)
	return &def, nil
}

// normalize applies the defaults Dify applies on import.
func normalize(def *Definition) {
	a := def.App
	switch a.IconType {
	case "emoji", "image", "link":
	default:
		a.IconType = "emoji"
	}
	if a.IconBackground == "" {
		a.IconBackground = "#FFFFFF"
	}
	if mc := def.ModelConfig; mc != nil {
		if mc.PromptType == "" {
			mc.PromptType = "simple"
		}
		// A chat app whose agent loop is switched on is an agent-chat app.
		if a.Mode == ModeChat && mc.AgentMode.Enabled &&
			(mc.AgentMode.Strategy == "function_call" || mc.AgentMode.Strategy == "react") {
			a.Mode = ModeAgentChat
		}
	}
}

var versionPattern = regexp.MustCompile(`^(\d+)(?:\.(\d+))?(?:\.(\d+))?`)

// checkVersion accepts every 0.x version of the DSL; a file without one is
// 0.1.0. A version written as a YAML number (0.1) is read as its text.
func checkVersion(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultVersion, nil
	}
	m := versionPattern.FindStringSubmatch(v)
	if m == nil {
		return "", apperr.InvalidParam("version %q is not a DSL version such as 0.1.5", v)
	}
	if major, _ := strconv.Atoi(m[1]); major != 0 {
		return "", apperr.InvalidParam("DSL version %s is not supported; this server reads versions 0.1.0 to 0.x", v)
	}
	return v, nil
}

// prepare readies a parsed document for decoding into Go values: mapping
// keys that YAML would type as numbers or booleans become text (so every
// generic map has string keys), and floats JSON cannot represent (.nan,
// .inf) stay text. Alias nodes are not followed; their targets are visited
// where they are defined.
func prepare(n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := prepare(c); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return apperr.InvalidParam("app definition has a mapping key that is not plain text (line %d)", k.Line)
			}
			if tag := k.ShortTag(); tag != "!!str" && tag != "!!merge" {
				k.Tag = "!!str"
			}
			if err := prepare(n.Content[i+1]); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.ShortTag() == "!!float" {
			var f float64
			if err := n.Decode(&f); err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				n.Tag = "!!str"
			}
		}
	}
	return nil
}

// valueAt returns the value node under key in a mapping node, or nil.
func valueAt(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalarAt(m *yaml.Node, key string) string {
	if v := valueAt(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// emptyMapping reports whether n is an empty mapping written directly in the
// file (a missing or null section is detected by decoding).
func emptyMapping(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.MappingNode && len(n.Content) == 0
}

// yamlMessage shortens a yaml.v3 error to its useful part.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
