package workflow

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"appkb/internal/platform/jsonnum"
)

// formField matches the place of a field in a form's text:
// {{#$outputs.name#}} (and the singular spelling some files use).
var formField = regexp.MustCompile(`\{\{#\$outputs?\.([a-zA-Z_][a-zA-Z0-9_]{0,29})#\}\}`)

// runHumanInput pauses the run on a form the first time the node is
// reached. When the run resumes, the node finishes with the answer: one
// output per field, the chosen action (also the edge handle to follow)
// and the form text with the answer filled in. A form that expired
// follows the __timeout handle instead.
func runHumanInput(x *nodeRun) (*outcome, error) {
	if x.n.container != "" {
		return nil, nodeErr("NotSupported", "The human-input node %q cannot run inside an iteration or a loop.", x.n.title)
	}
	var form *HumanForm
	if x.r.in.Resume != nil {
		form = x.r.in.Resume.Forms[x.n.id]
	}
	if form == nil {
		if x.r.e.Forms == nil {
			return nil, nodeErr("NotSupported", "The human-input node %q needs a form store, and this engine has none.", x.n.title)
		}
		form = x.newForm()
		if err := x.r.e.Forms.CreateForm(x.ctx, x.r.in.RunID, form); err != nil {
			return nil, nodeErr("InternalError", "The form of node %q could not be stored: %v", x.n.title, err)
		}
	}
	switch form.Status {
	case FormSubmitted:
		rendered := fillForm(form.Content, form.Data)
		x.r.emit(&HumanInputFormFilled{Envelope: x.r.envelope(EventHumanInputFormFilled), Data: HumanInputFormFilledData{
			NodeID: x.n.id, NodeTitle: x.n.title, RenderedContent: rendered, ActionID: form.ActionID,
			ActionText: actionTitle(form.Actions, form.ActionID), SubmittedData: plainMap(form.Data),
		}})
		outputs := map[string]any{}
		for k, v := range form.Data {
			outputs[k] = v
		}
		outputs["__action_id"] = form.ActionID
		outputs["__action_value"] = actionTitle(form.Actions, form.ActionID)
		outputs["__rendered_content"] = rendered
		return &outcome{outputs: outputs, handle: form.ActionID}, nil
	case FormTimeout:
		x.r.emit(&HumanInputFormTimeout{Envelope: x.r.envelope(EventHumanInputFormTimeout), Data: HumanInputFormTimeoutData{
			NodeID: x.n.id, NodeTitle: x.n.title, ExpirationTime: form.ExpiresAt,
		}})
		return &outcome{outputs: map[string]any{"__action_id": TimeoutAction, "__action_value": "", "__rendered_content": form.Content}, handle: TimeoutAction}, nil
	}
	x.r.emit(form.RequiredEvent(x.r.envelope(EventHumanInputRequired)))
	return &outcome{pause: form}, nil
}

// newForm builds the node's form from its data and the variables now in
// the pool.
func (x *nodeRun) newForm() *HumanForm {
	now := time.Now()
	cfg := x.n.cfg.(*humanConfig)
	f := &HumanForm{
		ID: uuid.NewString(), Token: newFormToken(), NodeID: x.n.id, NodeTitle: x.n.title,
		Content: x.pool.Render(cfg.content), Inputs: []map[string]any{}, Actions: []map[string]any{},
		Defaults: map[string]string{}, Options: map[string][]string{}, CreatedAt: now.Unix(), Status: FormWaiting,
	}
	for _, in := range cfg.inputs {
		name := asString(in["output_variable_name"])
		f.Inputs = append(f.Inputs, plainMap(in))
		def := asMap(in["default"])
		if def == nil {
			def = asMap(in["placeholder"])
		}
		switch asString(def["type"]) {
		case "constant":
			f.Defaults[name] = asString(def["value"])
		case "variable":
			if v, ok := x.pool.Get(selectorOf(def["selector"])); ok {
				f.Defaults[name] = Text(v)
			}
		}
		if src := asMap(in["option_source"]); src != nil {
			var opts []string
			if asString(src["type"]) == "variable" {
				v, _ := x.pool.Get(selectorOf(src["selector"]))
				for _, o := range asAnyList(v) {
					opts = append(opts, Text(o))
				}
			} else {
				for _, o := range asAnyList(src["value"]) {
					opts = append(opts, Text(o))
				}
			}
			f.Options[name] = opts
		}
	}
	for _, a := range cfg.actions {
		f.Actions = append(f.Actions, plainMap(a))
	}
	f.ExpiresAt = now.Add(cfg.timeout).Unix()
	return f
}

// formTimeout reads timeout and timeout_unit (36 hours when unset).
func formTimeout(d map[string]any) time.Duration {
	n, ok := jsonnum.Number(d["timeout"])
	if !ok || n <= 0 {
		n = 36
	}
	unit := time.Hour
	if asString(d["timeout_unit"]) == "day" {
		unit = 24 * time.Hour
	}
	return time.Duration(n * float64(unit))
}

// newFormToken is a random, URL-safe access token.
func newFormToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// fillForm puts the submitted values in their places in the form text.
func fillForm(content string, data map[string]any) string {
	return formField.ReplaceAllStringFunc(content, func(m string) string {
		name := formField.FindStringSubmatch(m)[1]
		if v, ok := data[name]; ok {
			return Text(v)
		}
		return m
	})
}

// actionTitle is the label of the action with the given id.
func actionTitle(actions []map[string]any, id string) string {
	return asString(findAction(actions, id)["title"])
}

// findAction is the action with the given id, nil when there is none.
func findAction(actions []map[string]any, id string) map[string]any {
	for _, a := range actions {
		if asString(a["id"]) == id {
			return a
		}
	}
	return nil
}

// CheckAnswer validates a submission: a known action and a value for
// every field, text for text fields and one of the options for select
// fields. It returns a message naming the problem, "" when the answer is
// acceptable.
func (f *HumanForm) CheckAnswer(action string, data map[string]any) string {
	if !f.hasAction(action) {
		return fmt.Sprintf("Unknown action %q.", action)
	}
	var missing []string
	for _, in := range f.Inputs {
		name := asString(in["output_variable_name"])
		v, ok := data[name]
		if !ok || v == nil {
			missing = append(missing, name)
			continue
		}
		switch asString(in["type"]) {
		case "paragraph", "text_input", "select", "":
			s, isText := v.(string)
			if !isText {
				return fmt.Sprintf("The input %q must be text.", name)
			}
			if opts := f.Options[name]; len(opts) > 0 && !slices.Contains(opts, s) {
				return fmt.Sprintf("The input %q must be one of: %s.", name, strings.Join(opts, ", "))
			}
		}
	}
	if len(missing) > 0 {
		return "Missing required inputs: " + strings.Join(missing, ", ")
	}
	return ""
}

func (f *HumanForm) hasAction(id string) bool { return findAction(f.Actions, id) != nil }
