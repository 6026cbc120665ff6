package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// workflowTool is the tool a workflow entry of the tools file stands for:
// it runs the app's workflow with the arguments as inputs. Its parameters
// are those the entry lists; without a list, arguments go through as they
// are.
func (r *Registry) workflowTool(id string, e *Provider, ref Ref) *Tool {
	name := ref.Name
	if name == "" {
		name = e.Name
	}
	props := map[string]any{}
	required := []any{}
	for _, p := range e.Parameters {
		typ := "string"
		switch p.Type {
		case "number", "integer", "boolean", "array", "object":
			typ = p.Type
		}
		props[p.Name] = map[string]any{"type": typ, "description": p.Description}
		if p.Required {
			required = append(required, p.Name)
		}
	}
	desc := e.Description
	if desc == "" {
		desc = "Runs the workflow app " + e.AppID + "."
	}
	appID := e.AppID
	return &Tool{
		Provider: id, Name: name, Label: name, Description: desc,
		InputSchema: map[string]any{"type": "object", "properties": props, "required": required},
		Run: func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
			r.mu.Lock()
			run := r.workflows
			r.mu.Unlock()
			if run == nil {
				return nil, errors.New("workflow tools cannot run on this server")
			}
			user := "tool"
			if env != nil && env.UserID != "" {
				user = env.UserID
			}
			outputs, err := run(ctx, appID, user, args)
			if err != nil {
				return nil, fmt.Errorf("the workflow of app %s failed: %v", appID, err)
			}
			return workflowOutput(outputs), nil
		},
	}
}

// workflowOutput gives the text of a workflow's outputs: the only output
// when there is one string, else the outputs as JSON.
func workflowOutput(outputs map[string]any) *Output {
	out := &Output{JSON: []any{outputs}}
	if len(outputs) == 1 {
		for _, v := range outputs {
			if s, ok := v.(string); ok {
				out.Text = s
				return out
			}
		}
	}
	data, _ := json.Marshal(outputs)
	out.Text = string(data)
	return out
}
