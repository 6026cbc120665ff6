package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"appkb/llm"

	"github.com/google/uuid"
)

// Bounds of maximum_iterations.
const (
	agentDefaultIterations = 3
	agentMaxIterations     = 50
)

// agentTool is a built-in tool as one agent node offers it to the model.
type agentTool struct {
	// fn is the function name the model sees.
	fn   string
	tool *builtinTool
	// fixed holds the arguments the workflow author set; the model cannot
	// change them.
	fixed       map[string]any
	description string
}

// agentParam reads one entry of agent_parameters: a selector for variable
// entries; strings of the others have their {{#…#}} templates rendered.
func (x *nodeRun) agentParam(name string) any {
	e := asMap(asMap(x.d["agent_parameters"])[name])
	if e == nil {
		return nil
	}
	v := e["value"]
	if asString(e["type"]) == "variable" {
		return x.get(selectorOf(v))
	}
	if s, ok := v.(string); ok {
		return x.pool.Render(s)
	}
	return v
}

// renderValue renders the templates of a string value.
func (x *nodeRun) renderValue(v any) any {
	if s, ok := v.(string); ok {
		return x.pool.Render(s)
	}
	return v
}

var fnNameRe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// agentTools reads the enabled tools of the node. A tool that is not
// built in fails the node, naming it.
func (x *nodeRun) agentTools() ([]*agentTool, error) {
	list, _ := asList(x.agentParam("tools"))
	var out []*agentTool
	used := map[string]bool{}
	for _, it := range list {
		m := asMap(it)
		if m == nil {
			continue
		}
		if en, has := m["enabled"]; has && !asBool(en) {
			continue
		}
		providerType := asString(m["type"])
		if providerType == "" {
			providerType = asString(m["provider_type"])
		}
		provider := asString(m["provider_name"])
		if provider == "" {
			provider = asString(m["provider_id"])
		}
		name := asString(m["tool_name"])
		t := findTool(providerType, provider, name)
		if t == nil {
			t = findTool(providerType, asString(m["provider_id"]), name)
		}
		if t == nil {
			reason := unavailableReason(providerType, provider, asString(m["plugin_unique_identifier"]), name)
			return nil, nodeErr("AgentNodeError", "The agent node %q cannot use one of its tools: %s.", x.n.title, reason)
		}
		fixed := map[string]any{}
		for k, v := range asMap(m["settings"]) {
			if sm := asMap(v); sm != nil {
				if val, ok := sm["value"]; ok && val != nil {
					fixed[k] = x.renderValue(val)
				}
				continue
			}
			if v != nil {
				fixed[k] = x.renderValue(v)
			}
		}
		for k, v := range asMap(m["tool_parameters"]) {
			if tm, ok := isTypedInput(v); ok {
				fixed[k] = x.toolInput(tm)
			}
		}
		// parameters: {name: {auto: 1|0, value}}; auto 0 means the author
		// fixed the value.
		for k, v := range asMap(m["parameters"]) {
			pm := asMap(v)
			if pm == nil || pm["value"] == nil || pm["value"] == "" {
				continue
			}
			if auto, ok := parseNumber(pm["auto"]); (ok && auto == 0) || pm["auto"] == false {
				fixed[k] = x.renderValue(pm["value"])
			}
		}
		fn := fnNameRe.ReplaceAllString(t.Name, "_")
		if used[fn] {
			fn = fnNameRe.ReplaceAllString(t.Provider+"_"+t.Name, "_")
		}
		for i := 2; used[fn]; i++ {
			fn = fmt.Sprintf("%s_%d", fnNameRe.ReplaceAllString(t.Name, "_"), i)
		}
		used[fn] = true
		desc := t.Description
		if d := asString(asMap(m["extra"])["description"]); strings.TrimSpace(d) != "" {
			desc = d
		}
		out = append(out, &agentTool{fn: fn, tool: t, fixed: fixed, description: desc})
	}
	return out, nil
}

// agentLog emits one agent_log event, with secrets masked.
func (x *nodeRun) agentLog(id, parent, label, status, errMsg string, data, meta map[string]any) {
	var pp, ep *string
	if parent != "" {
		pp = &parent
	}
	if errMsg != "" {
		m := x.pool.Redact(errMsg)
		ep = &m
	}
	if data == nil {
		data = map[string]any{}
	}
	if meta == nil {
		meta = map[string]any{}
	}
	x.r.emit(&AgentLog{Envelope: x.r.envelope(EventAgentLog), Data: AgentLogData{
		NodeExecutionID: x.execID, ID: id, Label: label, ParentID: pp, Error: ep, Status: status,
		Data: x.pool.redactMap(plainMap(data)), Metadata: x.pool.redactMap(plainMap(meta)), NodeID: x.n.id,
	}})
}

// checkStrategy refuses the agents appkb cannot run: version 2 agents and
// strategies other than function calling and ReAct of Dify's own agent
// plugin.
func (x *nodeRun) checkStrategy() (string, error) {
	if asString(x.d["version"]) == "2" || x.d["agent_node_kind"] != nil {
		kind := asString(x.d["agent_node_kind"])
		if kind == "" {
			kind = "version 2"
		}
		return "", nodeErr("NotSupported", "The agent node %q is a %s agent, which is not supported yet.", x.n.title, kind)
	}
	provider := asString(x.d["agent_strategy_provider_name"])
	strategy := asString(x.d["agent_strategy_name"])
	known := provider == "" || providerKey(provider) == "agent"
	switch {
	case strategy == "" || strings.EqualFold(strategy, "function_calling"):
		strategy = "function_calling"
	case strings.EqualFold(strategy, "react"):
		strategy = "ReAct"
	default:
		known = false
	}
	if !known {
		where := fmt.Sprintf("%q", provider)
		if p := asString(x.d["plugin_unique_identifier"]); p != "" {
			where += " (plugin " + p + ")"
		}
		return "", nodeErr("NotSupported", "The agent node %q uses the strategy %q of %s, which appkb does not have: it runs only the function_calling and ReAct strategies of langgenius/agent/agent.",
			x.n.title, asString(x.d["agent_strategy_name"]), where)
	}
	return strategy, nil
}

// runAgent runs the function-calling loop: the model gets the node's
// tools, the tools it asks for run and their results go back to it, until
// it answers without asking for tools. maximum_iterations bounds the
// rounds that offer tools; one more round without tools follows them, so
// the model has to answer. ReAct uses the same loop with the model's
// native tool calls.
func runAgent(x *nodeRun) (*outcome, error) {
	strategy, err := x.checkStrategy()
	if err != nil {
		return nil, err
	}
	mv := asMap(x.agentParam("model"))
	provider, modelName := asString(mv["provider"]), asString(mv["model"])
	if modelName == "" {
		modelName = asString(mv["name"])
	}
	var src ModelSource = x.r.e.Models
	if src == nil {
		src = (*llm.Registry)(nil)
	}
	model, err := src.Chat(provider, modelName)
	if err != nil {
		return nil, nodeErr("ModelError", "The model %s/%s is not available: %v", provider, modelName, err)
	}
	tools, err := x.agentTools()
	if err != nil {
		return nil, err
	}
	query := strings.TrimSpace(Text(x.agentParam("query")))
	instruction := Text(x.agentParam("instruction"))
	maxIter := agentDefaultIterations
	for _, k := range []string{"maximum_iterations", "max_iterations"} {
		if n, ok := parseNumber(x.agentParam(k)); ok {
			maxIter = int(n)
			break
		}
	}
	maxIter = min(max(maxIter, 1), agentMaxIterations)

	inputs := map[string]any{"query": query, "instruction": instruction}
	toolNames := make([]any, len(tools))
	offer := make([]llm.Tool, len(tools))
	byName := map[string]*agentTool{}
	for i, t := range tools {
		toolNames[i] = t.tool.Provider + "/" + t.tool.Name
		offer[i] = llm.Tool{Name: t.fn, Description: t.description, Parameters: t.tool.schema(t.fixed)}
		byName[t.fn] = t
	}
	process := map[string]any{
		"strategy": strategy, "model_provider": provider, "model_name": modelName, "tools": toolNames,
	}
	if query == "" {
		return &outcome{inputs: inputs, process: process}, nodeErr("AgentNodeError", "The agent node %q has no query.", x.n.title)
	}

	var msgs []llm.Message
	if strings.TrimSpace(instruction) != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: instruction})
	}
	msgs = append(msgs, x.historyMessages()...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: query})

	params := asMap(mv["completion_params"])
	env := &toolEnv{ctx: x.ctx, e: x.r.e, appID: x.r.in.AppID, userID: x.r.in.UserID}
	var usage llm.Usage
	var price float64
	currency := ""
	text, rounds := "", 0
	for round := 1; round <= maxIter+1; round++ {
		rounds = round
		roundID, started := uuid.NewString(), time.Now()
		label := fmt.Sprintf("ROUND %d", round)
		x.agentLog(roundID, "", label, AgentLogStart, "", nil, map[string]any{"started_at": float64(started.Unix())})
		req := llm.ChatRequest{Messages: msgs, Params: params}
		if round <= maxIter && len(offer) > 0 {
			req.Tools = offer
		}
		resp, err := model.Chat(x.ctx, req)
		if err != nil {
			x.agentLog(roundID, "", label, AgentLogError, err.Error(), nil, map[string]any{"elapsed_time": time.Since(started).Seconds()})
			process["usage"] = usageMap(usage)
			return &outcome{inputs: inputs, process: process, tokens: usage.TotalTokens}, nodeErr("AgentNodeError", "The model call failed: %v", err)
		}
		usage.PromptTokens += resp.Usage.PromptTokens
		usage.CompletionTokens += resp.Usage.CompletionTokens
		usage.TotalTokens += resp.Usage.TotalTokens
		usage.Latency += resp.Usage.Latency
		if p, err := strconv.ParseFloat(resp.Usage.TotalPrice, 64); err == nil {
			price += p
		}
		if resp.Usage.Currency != "" {
			currency = resp.Usage.Currency
		}
		calls := resp.ToolCalls
		if req.Tools == nil {
			calls = nil
		}
		callList := make([]any, len(calls))
		for i, c := range calls {
			callList[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": c.Arguments}
		}
		x.agentLog(uuid.NewString(), roundID, modelName+" Thought", AgentLogSuccess, "",
			map[string]any{"output": map[string]any{"llm_response": resp.Content, "tool_calls": callList}},
			map[string]any{"provider": provider, "elapsed_time": time.Since(started).Seconds(), "total_tokens": float64(resp.Usage.TotalTokens)})
		if len(calls) == 0 {
			text = resp.Content
			x.agentLog(roundID, "", label, AgentLogSuccess, "", map[string]any{"output": map[string]any{"llm_response": resp.Content}},
				map[string]any{"elapsed_time": time.Since(started).Seconds()})
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		observations := map[string]any{}
		for _, c := range calls {
			t0 := time.Now()
			input, obs, failure := x.callAgentTool(env, byName, c)
			status := AgentLogSuccess
			if failure != "" {
				status = AgentLogError
			}
			x.agentLog(uuid.NewString(), roundID, "CALL "+c.Name, status, failure,
				map[string]any{"output": map[string]any{
					"tool_call_id": c.ID, "tool_call_name": c.Name, "tool_call_input": input, "tool_response": obs,
				}},
				map[string]any{"elapsed_time": time.Since(t0).Seconds()})
			observations[c.Name] = obs
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: obs})
		}
		x.agentLog(roundID, "", label, AgentLogSuccess, "",
			map[string]any{"output": map[string]any{"llm_response": resp.Content, "observation": observations}},
			map[string]any{"elapsed_time": time.Since(started).Seconds()})
		if err := x.ctx.Err(); err != nil {
			return &outcome{inputs: inputs, process: process, tokens: usage.TotalTokens}, err
		}
	}
	if price > 0 {
		usage.TotalPrice = strconv.FormatFloat(price, 'f', -1, 64)
	}
	usage.Currency = currency
	um := usageMap(usage)
	process["usage"] = um
	process["rounds"] = float64(rounds)
	return &outcome{
		inputs:  inputs,
		process: process,
		outputs: map[string]any{"text": text, "files": []any{}, "json": []any{}, "usage": um},
		tokens:  usage.TotalTokens, price: price, currency: currencyOr(currency),
	}, nil
}

// callAgentTool runs one tool call of the model. It gives the arguments
// used, the observation handed back to the model and, when the call
// failed, why; a failed call does not fail the node, the model is told.
func (x *nodeRun) callAgentTool(env *toolEnv, byName map[string]*agentTool, c llm.ToolCall) (map[string]any, string, string) {
	args := map[string]any{}
	at := byName[c.Name]
	if at == nil {
		msg := fmt.Sprintf("there is no tool named %q", c.Name)
		return args, "Error: " + msg + ".", msg
	}
	if s := strings.TrimSpace(c.Arguments); s != "" {
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			msg := "the arguments are not a JSON object"
			return map[string]any{}, "Error: " + msg + ".", msg
		}
	}
	for k, v := range at.fixed {
		args[k] = v
	}
	prepared, err := at.tool.prepare(args)
	if err != nil {
		return args, "Error: " + err.Error() + ".", err.Error()
	}
	out, err := at.tool.Run(env, prepared)
	if err != nil {
		return prepared, "Error: " + err.Error() + ".", err.Error()
	}
	obs := out.Text
	if obs == "" && len(out.JSON) > 0 {
		data, _ := json.Marshal(out.JSON)
		obs = string(data)
	}
	return prepared, obs, ""
}
