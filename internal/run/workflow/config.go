package workflow

import (
	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/jsonnum"
	"time"
)

// Typed node settings. Compile decodes the settings of these node kinds
// once, with the decoder that nodeKinds (kinds.go) names for the kind,
// into the structs below, and refuses a graph whose settings cannot work
// with a 400 naming the node, before anything runs. Executors read the
// struct (gnode.cfg) instead of looking keys up in the node's data at
// every run. Kinds without a decoder still read their data map.

// endConfig is an end node: the run's outputs, each read from a variable.
type endConfig struct {
	outputs []namedSelector
}

// namedSelector is an output name and the variable it takes its value from.
type namedSelector struct {
	name     string
	selector []string
}

// answerConfig is an answer node: its template, split once.
type answerConfig struct {
	segments []segment
}

// ifElseConfig is an if-else node: its cases in order.
type ifElseConfig struct {
	cases []ifCase
}

// ifCase is one case of an if-else node; the edge with its id is taken
// when its conditions hold.
type ifCase struct {
	id         string
	logical    string
	conditions []map[string]any
}

// classifierConfig is a question-classifier node.
type classifierConfig struct {
	model       modelRef
	query       []string
	classes     []classOption
	instruction string
}

// classOption is one class; the edge with its id is taken when the class
// is chosen.
type classOption struct {
	id, name, label string
}

// extractorConfig is a parameter-extractor node.
type extractorConfig struct {
	model       modelRef
	query       []string
	params      []map[string]any
	instruction string
}

// docExtractConfig is a document-extractor node: the variable holding the
// file or files.
type docExtractConfig struct {
	selector []string
}

// humanConfig is a human-input node: its form, minus what depends on the
// run (content and defaults are rendered when the node runs).
type humanConfig struct {
	content string
	inputs  []map[string]any
	actions []map[string]any
	timeout time.Duration
}

// modelRef is the model an llm-like node names.
type modelRef struct {
	provider, name, mode string
	params               map[string]any
}

func modelRefOf(d map[string]any) modelRef {
	m := asMap(d["model"])
	return modelRef{provider: asString(m["provider"]), name: asString(m["name"]), mode: asString(m["mode"]),
		params: asMap(m["completion_params"])}
}

// modelNamer is a typed config that names a model.
type modelNamer interface{ modelRef() modelRef }

// llmConfig is an llm node.
type llmConfig struct {
	model modelRef
	// context, when on, is the variable whose text fills {{#context#}}.
	contextOn  bool
	contextSel []string
	prompts    []promptMessage
	jinjaVars  []map[string]any
	// memory is on for chatflows when the node declares it;
	// queryTemplate is the user turn added after the history.
	memory        bool
	queryTemplate string
	separated     bool
	schema        map[string]any
	structured    bool
}

// promptMessage is one message of an llm node's prompt.
type promptMessage struct {
	role      string
	text      string
	jinja     bool
	jinjaText string
}

func (c *llmConfig) modelRef() modelRef        { return c.model }
func (c *classifierConfig) modelRef() modelRef { return c.model }
func (c *extractorConfig) modelRef() modelRef  { return c.model }

// iterationConfig is an iteration node.
type iterationConfig struct {
	iterator, output []string
	mode             string // error_handle_mode
	parallel         bool
	parallelNums     int // 0: the default
	flatten          bool
}

// loopConfig is a loop node.
type loopConfig struct {
	count      int
	vars       []map[string]any // loop variables that have a label
	mode       string
	conditions []map[string]any // break conditions
	logical    string
}

// startConfig is a start node: its input form.
type startConfig struct {
	vars []startVar
}

// startVar is one field of the input form.
type startVar struct {
	name, kind string
	required   bool
	def        any
	// maxLength bounds text (characters) or file lists (files); 0: none.
	maxLength int
	options   []string
}

// listOperatorConfig is a list-operator node; each step is off when its
// field is nil.
type listOperatorConfig struct {
	variable []string
	filter   []map[string]any // conditions, all of which must hold
	filterOn bool
	extract  any // serial, a template
	orderOn  bool
	orderKey string
	desc     bool
	limit    int // -1: no limit
}

// aggregatorConfig is a variable-aggregator node: the candidate
// variables, in order, or named groups of them.
type aggregatorConfig struct {
	variables [][]string
	groups    []aggregatorGroup // set when groups are on
}

type aggregatorGroup struct {
	name      string
	variables [][]string
}

// assignerConfig is an assigner node: its writes in order.
type assignerConfig struct {
	ops []assignOp
}

// assignOp writes one variable: with a constant, the value of another
// variable (source), or no value (operations such as clear).
type assignOp struct {
	target   []string
	kind     string
	constant any
	isConst  bool
	source   []string
}

// comparisonOperators are the operators compare knows.
var comparisonOperators = map[string]bool{
	"empty": true, "not empty": true, "null": true, "not exists": true, "not null": true, "exists": true,
	"contains": true, "not contains": true, "start with": true, "end with": true, "is": true, "is not": true,
	"in": true, "not in": true, "all of": true,
	"=": true, "≠": true, ">": true, "<": true, "≥": true, "≤": true, "==": true, "!=": true, ">=": true, "<=": true,
}

// configError is the error of a node whose settings cannot work.
func configError(n *gnode, format string, args ...any) error {
	return apperr.InvalidParam("The %s node %q (%s): "+format, append([]any{n.kind, n.title, n.id}, args...)...)
}

// The decoders below read one kind's settings from the node's data into
// its typed config; nodeKinds (kinds.go) names the decoder of each kind.

func decodeStart(n *gnode) (any, error) {
	c := &startConfig{}
	seen := map[string]bool{}
	for _, v := range asList2(n.data["variables"]) {
		name := asString(v["variable"])
		if name == "" {
			continue
		}
		if seen[name] {
			return nil, configError(n, "two input fields are named %q.", name)
		}
		seen[name] = true
		sv := startVar{name: name, kind: asString(v["type"]), required: asBool(v["required"]), def: v["default"]}
		if ml, ok := jsonnum.Number(v["max_length"]); ok && ml > 0 {
			sv.maxLength = int(ml)
		}
		for _, o := range asAnyList(v["options"]) {
			sv.options = append(sv.options, Text(o))
		}
		c.vars = append(c.vars, sv)
	}
	return c, nil
}

func decodeEnd(n *gnode) (any, error) {
	c := &endConfig{}
	for _, o := range asList2(n.data["outputs"]) {
		name := asString(o["variable"])
		if name == "" {
			continue
		}
		c.outputs = append(c.outputs, namedSelector{name: name, selector: selectorOf(o["value_selector"])})
	}
	return c, nil
}

func decodeAnswer(n *gnode) (any, error) {
	return &answerConfig{segments: parseTemplate(asString(n.data["answer"]))}, nil
}

func decodeIfElse(n *gnode) (any, error) {
	c := &ifElseConfig{}
	for i, cs := range asList2(n.data["cases"]) {
		id := asString(cs["case_id"])
		if id == "" {
			id = asString(cs["id"])
		}
		if id == "" {
			return nil, configError(n, "case %d has no case_id.", i+1)
		}
		conds := asList2(cs["conditions"])
		if err := checkConditions(n, conds); err != nil {
			return nil, err
		}
		c.cases = append(c.cases, ifCase{id: id, logical: asString(cs["logical_operator"]), conditions: conds})
	}
	return c, nil
}

func decodeClassifier(n *gnode) (any, error) {
	c := &classifierConfig{model: modelRefOf(n.data), query: selectorOf(n.data["query_variable_selector"]), instruction: asString(n.data["instruction"])}
	for _, cl := range asList2(n.data["classes"]) {
		c.classes = append(c.classes, classOption{id: Text(cl["id"]), name: Text(cl["name"]), label: Text(cl["label"])})
	}
	if len(c.classes) == 0 {
		return nil, configError(n, "the classifier has no classes.")
	}
	return c, nil
}

func decodeExtractor(n *gnode) (any, error) {
	c := &extractorConfig{model: modelRefOf(n.data), query: selectorOf(n.data["query"]), params: asList2(n.data["parameters"]),
		instruction: asString(n.data["instruction"])}
	for i, p := range c.params {
		if asString(p["name"]) == "" {
			return nil, configError(n, "parameter %d has no name.", i+1)
		}
	}
	return c, nil
}

func decodeLLM(n *gnode) (any, error) {
	c := &llmConfig{model: modelRefOf(n.data), jinjaVars: asList2(asMap(n.data["prompt_config"])["jinja2_variables"]),
		separated: asString(n.data["reasoning_format"]) == "separated"}
	if ctx := asMap(n.data["context"]); ctx != nil && asBool(ctx["enabled"]) {
		c.contextOn, c.contextSel = true, selectorOf(ctx["variable_selector"])
	}
	switch pt := n.data["prompt_template"].(type) {
	case []any:
		for _, m := range asList2(pt) {
			c.prompts = append(c.prompts, promptMessageOf(m, llm.RoleUser))
		}
	case map[string]any:
		// The completion-model form: one text, always the user's.
		pm := promptMessageOf(pt, llm.RoleUser)
		pm.role = llm.RoleUser
		c.prompts = append(c.prompts, pm)
	}
	if mem := asMap(n.data["memory"]); mem != nil {
		c.memory = true
		c.queryTemplate = asString(mem["query_prompt_template"])
		if c.queryTemplate == "" {
			c.queryTemplate = "{{#sys.query#}}"
		}
	}
	c.schema, c.structured = structuredSchema(n.data)
	return c, nil
}

// promptMessageOf reads one prompt message; role is used when the message
// names none.
func promptMessageOf(m map[string]any, role string) promptMessage {
	if r := asString(m["role"]); r != "" {
		role = r
	}
	return promptMessage{role: role, text: asString(m["text"]),
		jinja: asString(m["edition_type"]) == "jinja2", jinjaText: asString(m["jinja2_text"])}
}

func decodeIteration(n *gnode) (any, error) {
	c := &iterationConfig{iterator: selectorOf(n.data["iterator_selector"]), output: selectorOf(n.data["output_selector"]),
		mode: errorHandleMode(n.data), parallel: asBool(n.data["is_parallel"]), flatten: flattenOutput(n.data)}
	if f, ok := jsonnum.Number(n.data["parallel_nums"]); ok {
		c.parallelNums = int(f)
	}
	return c, nil
}

func decodeLoop(n *gnode) (any, error) {
	c := &loopConfig{count: 1, mode: errorHandleMode(n.data), conditions: asList2(n.data["break_conditions"]),
		logical: asString(n.data["logical_operator"])}
	if f, ok := jsonnum.Number(n.data["loop_count"]); ok && f >= 1 {
		c.count = int(f)
	}
	c.count = min(c.count, maxLoopCount)
	for _, lv := range asList2(n.data["loop_variables"]) {
		if asString(lv["label"]) != "" {
			c.vars = append(c.vars, lv)
		}
	}
	if err := checkConditions(n, c.conditions); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeListOperator(n *gnode) (any, error) {
	c := &listOperatorConfig{variable: selectorOf(n.data["variable"]), limit: -1}
	if f := asMap(n.data["filter_by"]); f != nil && asBool(f["enabled"]) {
		c.filterOn, c.filter = true, asList2(f["conditions"])
		if err := checkConditions(n, c.filter); err != nil {
			return nil, err
		}
	}
	if e := asMap(n.data["extract_by"]); e != nil && asBool(e["enabled"]) {
		c.extract = e["serial"]
		if c.extract == nil {
			c.extract = ""
		}
	}
	if o := asMap(n.data["order_by"]); o != nil && asBool(o["enabled"]) {
		c.orderOn, c.orderKey, c.desc = true, asString(o["key"]), asString(o["value"]) == "desc"
	}
	if l := asMap(n.data["limit"]); l != nil && asBool(l["enabled"]) {
		if f, ok := jsonnum.Number(l["size"]); ok && f >= 0 {
			c.limit = int(f)
		}
	}
	return c, nil
}

func decodeAggregator(n *gnode) (any, error) {
	selectors := func(list any) [][]string {
		var out [][]string
		for _, s := range asAnyList(list) {
			out = append(out, selectorOf(s))
		}
		return out
	}
	c := &aggregatorConfig{variables: selectors(n.data["variables"])}
	if adv := asMap(n.data["advanced_settings"]); adv != nil && asBool(adv["group_enabled"]) {
		c.groups = []aggregatorGroup{}
		for _, grp := range asList2(adv["groups"]) {
			c.groups = append(c.groups, aggregatorGroup{name: asString(grp["group_name"]), variables: selectors(grp["variables"])})
		}
	}
	return c, nil
}

func decodeAssigner(n *gnode) (any, error) {
	c := &assignerConfig{}
	if asString(n.data["version"]) == "2" {
		for _, it := range asList2(n.data["items"]) {
			o := assignOp{target: selectorOf(it["variable_selector"]), kind: asString(it["operation"])}
			if it["input_type"] == "constant" {
				o.constant, o.isConst = it["value"], true
			} else if sel := selectorOf(it["value"]); len(sel) >= 2 {
				o.source = sel
			}
			c.ops = append(c.ops, o)
		}
	} else {
		o := assignOp{target: selectorOf(n.data["assigned_variable_selector"]), kind: asString(n.data["write_mode"])}
		if sel := selectorOf(n.data["input_variable_selector"]); len(sel) >= 2 {
			o.source = sel
		}
		c.ops = append(c.ops, o)
	}
	for i, o := range c.ops {
		if len(o.target) < 2 {
			return nil, configError(n, "write %d names no variable to write.", i+1)
		}
	}
	return c, nil
}

func decodeHumanInput(n *gnode) (any, error) {
	c := &humanConfig{content: asString(n.data["form_content"]), timeout: formTimeout(n.data)}
	for _, in := range asList2(n.data["inputs"]) {
		if asString(in["output_variable_name"]) != "" {
			c.inputs = append(c.inputs, in)
		}
	}
	seen := map[string]bool{}
	for i, a := range asList2(n.data["user_actions"]) {
		id := asString(a["id"])
		switch {
		case id == "":
			return nil, configError(n, "action %d has no id.", i+1)
		case seen[id]:
			return nil, configError(n, "two actions have the id %q.", id)
		}
		seen[id] = true
		c.actions = append(c.actions, a)
	}
	return c, nil
}

func decodeDocExtractor(n *gnode) (any, error) {
	sel := selectorOf(n.data["variable_selector"])
	if len(sel) < 2 {
		return nil, configError(n, "it names no variable to read files from.")
	}
	return &docExtractConfig{selector: sel}, nil
}

// checkConditions refuses a condition whose operator compare does not
// know, including those on file attributes.
func checkConditions(n *gnode, conds []map[string]any) error {
	for _, c := range conds {
		if sub := asMap(c["sub_variable_condition"]); sub != nil && len(asList2(sub["conditions"])) > 0 {
			if err := checkConditions(n, asList2(sub["conditions"])); err != nil {
				return err
			}
			continue
		}
		if op := asString(c["comparison_operator"]); !comparisonOperators[op] {
			return configError(n, "unknown comparison operator %q.", op)
		}
	}
	return nil
}

// Check compiles the workflow of a definition that has one, so that
// settings that cannot work are refused when the app is imported rather
// than when it first runs. Definitions without a workflow pass.
func Check(def *apps.Definition) error {
	if def == nil || !apps.UsesWorkflow(def.App.Mode) {
		return nil
	}
	_, err := Compile(def.Workflow)
	return err
}
