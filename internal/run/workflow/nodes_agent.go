package workflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"appkb/internal/llm"
	"appkb/internal/platform/jsonnum"
	"appkb/internal/run/agent"
	"appkb/internal/run/tools"

	"github.com/google/uuid"
)

// agentDefaultIterations is maximum_iterations when the node sets none.
const agentDefaultIterations = 3

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

// agentTools reads the enabled tools of the node. A tool that cannot be
// found fails the node, naming it.
func (x *nodeRun) agentTools() ([]*agent.Tool, error) {
	list, _ := asList(x.agentParam("tools"))
	var out []*agent.Tool
	for _, it := range list {
		m := asMap(it)
		if m == nil {
			continue
		}
		if en, has := m["enabled"]; has && !asBool(en) {
			continue
		}
		t, err := x.r.e.Tools.Find(x.ctx, toolRef(m, "type", "provider_type"))
		if err != nil {
			return nil, nodeErr("AgentNodeError", "The agent node %q cannot use one of its tools: %s.", x.n.title, strings.TrimSuffix(err.Error(), "."))
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
			if auto, ok := jsonnum.Number(pm["auto"]); (ok && auto == 0) || pm["auto"] == false {
				fixed[k] = x.renderValue(pm["value"])
			}
		}
		desc := ""
		if d := asString(asMap(m["extra"])["description"]); strings.TrimSpace(d) != "" {
			desc = d
		}
		out = append(out, &agent.Tool{Tool: t, Fixed: plainMap(fixed), Description: desc, Label: asString(m["tool_label"])})
	}
	return out, nil
}

// mcpServers reads the mcp_servers_config parameter of the MCP agent
// strategy: a JSON object (or an object under "mcpServers") of servers,
// each {url, headers, timeout, transport}. Without transport, a URL ending
// in /sse is an SSE server, any other a Streamable HTTP one.
func (x *nodeRun) mcpServers() ([]tools.MCPServer, error) {
	raw := x.agentParam("mcp_servers_config")
	if raw == nil || raw == "" {
		return nil, nil
	}
	m := asMap(raw)
	if s, ok := raw.(string); ok && strings.TrimSpace(s) != "" {
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, nodeErr("AgentNodeError", "The mcp_servers_config of agent node %q is not a JSON object: %v.", x.n.title, err)
		}
	}
	if inner := asMap(m["mcpServers"]); inner != nil {
		m = inner
	}
	var out []tools.MCPServer
	for _, name := range sortedKeys(m) {
		sm := asMap(m[name])
		u := asString(sm["url"])
		if u == "" {
			return nil, nodeErr("AgentNodeError", "The MCP server %q of agent node %q has no url.", name, x.n.title)
		}
		s := tools.MCPServer{Name: name, URL: u, Transport: tools.TransportStreamable, Headers: map[string]string{}}
		switch t := strings.ToLower(asString(sm["transport"])); {
		case t == "sse" || (t == "" && strings.HasSuffix(strings.TrimRight(u, "/"), "/sse")):
			s.Transport = tools.TransportSSE
		}
		for k, v := range asMap(sm["headers"]) {
			s.Headers[k] = Text(v)
		}
		if f, ok := jsonnum.Number(sm["timeout"]); ok && f > 0 {
			s.Timeout = time.Duration(f * float64(time.Second))
		}
		out = append(out, s)
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
// plugin and the strategies of the MCP agent plugin (hjlarry/agent).
func (x *nodeRun) checkStrategy() (string, bool, error) {
	if asString(x.d["version"]) == "2" || x.d["agent_node_kind"] != nil {
		kind := asString(x.d["agent_node_kind"])
		if kind == "" {
			kind = "version 2"
		}
		return "", false, nodeErr("NotSupported", "The agent node %q is a %s agent, which is not supported yet.", x.n.title, kind)
	}
	provider := asString(x.d["agent_strategy_provider_name"])
	strategy := asString(x.d["agent_strategy_name"])
	if strings.HasPrefix(provider, "hjlarry/agent") {
		if strategy == "" {
			strategy = "mcp_agent"
		}
		return strategy, true, nil
	}
	known := provider == "" || provider == "agent" || provider == "langgenius/agent/agent"
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
		return "", false, nodeErr("NotSupported", "The agent node %q uses the strategy %q of %s, which appkb does not have: it runs the function_calling and ReAct strategies of langgenius/agent/agent and the MCP strategies of hjlarry/agent.",
			x.n.title, asString(x.d["agent_strategy_name"]), where)
	}
	return strategy, false, nil
}

// runAgent runs the node's agent through the shared loop (package agent)
// and reports every round, model call and tool call as agent_log events.
func runAgent(x *nodeRun) (*outcome, error) {
	strategy, withMCP, err := x.checkStrategy()
	if err != nil {
		return nil, err
	}
	mv := asMap(x.agentParam("model"))
	provider, modelName, model, err := x.agentModel(mv)
	if err != nil {
		return nil, err
	}
	list, closeMCP, err := x.agentToolList(withMCP)
	defer closeMCP()
	if err != nil {
		return nil, err
	}
	query := strings.TrimSpace(Text(x.agentParam("query")))
	instruction := Text(x.agentParam("instruction"))
	maxIter := agentDefaultIterations
	for _, k := range []string{"maximum_iterations", "max_iterations"} {
		if n, ok := jsonnum.Number(x.agentParam(k)); ok {
			maxIter = int(n)
			break
		}
	}
	inputs := map[string]any{"query": query, "instruction": instruction}
	toolNames := make([]any, len(list))
	for i, t := range list {
		toolNames[i] = t.Tool.Key()
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

	logs := &agentRounds{x: x, provider: provider, model: modelName, ids: map[int]string{}}
	res, err := agent.Run(x.ctx, agent.Config{
		Model: model, Messages: msgs, Tools: list, MaxIterations: maxIter,
		Params: asMap(mv["completion_params"]), Env: x.toolEnv(), Hooks: logs.hooks(),
	})
	if res == nil {
		res = &agent.Result{}
	}
	if err != nil {
		if r := lastRound(res); r != nil && len(r.Calls) == 0 && !r.Final {
			x.agentLog(logs.ids[r.Position], "", roundLabel(r), AgentLogError, err.Error(), nil, map[string]any{"elapsed_time": time.Since(r.Started).Seconds()})
		}
		process["usage"] = usageMap(res.Usage)
		if x.ctx.Err() != nil {
			return &outcome{inputs: inputs, process: process, tokens: res.Usage.TotalTokens}, x.ctx.Err()
		}
		if ne, ok := err.(*NodeError); ok {
			return &outcome{inputs: inputs, process: process, tokens: res.Usage.TotalTokens}, ne
		}
		return &outcome{inputs: inputs, process: process, tokens: res.Usage.TotalTokens}, nodeErr("AgentNodeError", "The model call failed: %v", err)
	}
	usage := res.Usage
	if res.Price > 0 {
		usage.TotalPrice = strconv.FormatFloat(res.Price, 'f', -1, 64)
	}
	usage.Currency = res.Currency
	um := usageMap(usage)
	process["usage"] = um
	process["rounds"] = float64(len(res.Rounds))
	return &outcome{
		inputs:  inputs,
		process: process,
		outputs: map[string]any{"text": res.Answer, "files": orEmpty(logs.files), "json": []any{}, "usage": um},
		tokens:  usage.TotalTokens, price: res.Price, currency: currencyOr(res.Currency),
	}, nil
}

// agentModel is the chat model the node's model parameter names.
func (x *nodeRun) agentModel(mv map[string]any) (provider, name string, model llm.ChatModel, err error) {
	provider, name = asString(mv["provider"]), asString(mv["model"])
	if name == "" {
		name = asString(mv["name"])
	}
	var src ModelSource = x.r.e.Models
	if src == nil {
		src = (*llm.Registry)(nil)
	}
	model, err = src.Chat(provider, name)
	if err != nil {
		return "", "", nil, nodeErr("ModelError", "The model %s/%s is not available: %v", provider, name, err)
	}
	return provider, name, model, nil
}

// agentToolList is the node's tools, with those of its MCP servers when
// the strategy uses them. The sessions stay open (one per server, for
// listing and every call) until the returned close runs, which is never
// nil.
func (x *nodeRun) agentToolList(withMCP bool) ([]*agent.Tool, func(), error) {
	var sessions []*tools.MCPSession
	closeAll := func() {
		for i := len(sessions) - 1; i >= 0; i-- {
			sessions[i].Close()
		}
	}
	list, err := x.agentTools()
	if err != nil {
		return nil, closeAll, err
	}
	if withMCP {
		servers, err := x.mcpServers()
		if err != nil {
			return nil, closeAll, err
		}
		for _, s := range servers {
			sess, found, err := tools.OpenMCP(x.ctx, s, x.r.e.Tools.Guard())
			if err != nil {
				return nil, closeAll, nodeErr("AgentNodeError", "The agent node %q cannot use the MCP server %q: %s.", x.n.title, s.Name, strings.TrimSuffix(err.Error(), "."))
			}
			sessions = append(sessions, sess)
			for _, t := range found {
				list = append(list, &agent.Tool{Tool: t})
			}
		}
	}
	return agent.NewTools(list), closeAll, nil
}

// agentRounds turns the agent loop's progress into agent_log events: one
// log a round, with its model thought and tool calls under it, and keeps
// the files the tools return.
type agentRounds struct {
	x               *nodeRun
	provider, model string
	ids             map[int]string // the log id of each round, by position
	files           []any
}

func roundLabel(r *agent.Round) string { return fmt.Sprintf("ROUND %d", r.Position) }

func (l *agentRounds) hooks() agent.Hooks {
	x := l.x
	return agent.Hooks{
		RoundStart: func(r *agent.Round) error {
			l.ids[r.Position] = uuid.NewString()
			x.agentLog(l.ids[r.Position], "", roundLabel(r), AgentLogStart, "", nil, map[string]any{"started_at": float64(r.Started.Unix())})
			return nil
		},
		Thought: func(r *agent.Round) error {
			callList := make([]any, len(r.Calls))
			for i, c := range r.Calls {
				callList[i] = map[string]any{"id": c.ID, "name": c.Fn}
			}
			x.agentLog(uuid.NewString(), l.ids[r.Position], l.model+" Thought", AgentLogSuccess, "",
				map[string]any{"output": map[string]any{"llm_response": r.Thought, "tool_calls": callList}},
				map[string]any{"provider": l.provider, "elapsed_time": time.Since(r.Started).Seconds(), "total_tokens": float64(r.Usage.TotalTokens)})
			return nil
		},
		CallDone: func(r *agent.Round, c *agent.Call) error {
			status := AgentLogSuccess
			if c.Error != "" {
				status = AgentLogError
			}
			if c.Output != nil && len(c.Output.Files) > 0 {
				saved, err := x.saveToolFiles(c.Output.Files)
				if err != nil {
					return err
				}
				l.files = append(l.files, saved...)
			}
			x.agentLog(uuid.NewString(), l.ids[r.Position], "CALL "+c.Fn, status, c.Error,
				map[string]any{"output": map[string]any{
					"tool_call_id": c.ID, "tool_call_name": c.Fn, "tool_call_input": c.Input, "tool_response": c.Observation,
				}},
				map[string]any{"elapsed_time": c.Elapsed.Seconds()})
			return nil
		},
		RoundEnd: func(r *agent.Round) error {
			out := map[string]any{"llm_response": r.Thought}
			if len(r.Calls) > 0 {
				obs := map[string]any{}
				for _, c := range r.Calls {
					obs[c.Fn] = c.Observation
				}
				out["observation"] = obs
			}
			x.agentLog(l.ids[r.Position], "", roundLabel(r), AgentLogSuccess, "", map[string]any{"output": out},
				map[string]any{"elapsed_time": r.Elapsed.Seconds()})
			return nil
		},
	}
}

func lastRound(res *agent.Result) *agent.Round {
	if len(res.Rounds) == 0 {
		return nil
	}
	return res.Rounds[len(res.Rounds)-1]
}

// sortedKeys lists the keys of m in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
