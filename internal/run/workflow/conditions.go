package workflow

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"appkb/internal/platform/jsonnum"
)

// compare applies one comparison operator of the DSL to an actual value
// and the expected value of a condition.
func compare(op string, actual, expected any) (bool, error) {
	switch op {
	case "empty":
		return isEmpty(actual), nil
	case "not empty":
		return !isEmpty(actual), nil
	case "null", "not exists":
		return actual == nil, nil
	case "not null", "exists":
		return actual != nil, nil
	case "contains", "not contains":
		var ok bool
		if list, isList := asList(actual); isList {
			for _, e := range list {
				if Text(e) == Text(expected) {
					ok = true
					break
				}
			}
		} else if actual != nil {
			ok = strings.Contains(Text(actual), Text(expected))
		}
		if op == "not contains" {
			return !ok, nil
		}
		return ok, nil
	case "start with":
		return actual != nil && strings.HasPrefix(Text(actual), Text(expected)), nil
	case "end with":
		return actual != nil && strings.HasSuffix(Text(actual), Text(expected)), nil
	case "is", "is not":
		ok := actual != nil && Text(actual) == Text(expected)
		if b, isBool := actual.(bool); isBool {
			if e, isB := coerce(TypeBoolean, expected).(bool); isB {
				ok = b == e
			}
		}
		if op == "is not" {
			return !ok, nil
		}
		return ok, nil
	case "in", "not in", "all of":
		var want []string
		if list, ok := asList(expected); ok {
			for _, e := range list {
				want = append(want, Text(e))
			}
		} else if s := Text(expected); s != "" {
			for _, p := range strings.Split(s, ",") {
				want = append(want, strings.TrimSpace(p))
			}
		}
		if op == "all of" {
			have, _ := asList(actual)
			for _, w := range want {
				if !slices.ContainsFunc(have, func(h any) bool { return Text(h) == w }) {
					return false, nil
				}
			}
			return true, nil
		}
		ok := actual != nil && slices.Contains(want, Text(actual))
		if op == "not in" {
			return !ok, nil
		}
		return ok, nil
	case "=", "≠", ">", "<", "≥", "≤", "==", "!=", ">=", "<=":
		if actual == nil {
			return false, nil
		}
		a, ok1 := jsonnum.Number(actual)
		b, ok2 := jsonnum.Number(expected)
		if !ok1 || !ok2 {
			return false, fmt.Errorf("%q compares numbers, got %s and %s", op, TypeOf(actual), TypeOf(expected))
		}
		c := cmp.Compare(a, b)
		switch op {
		case "=", "==":
			return c == 0, nil
		case "≠", "!=":
			return c != 0, nil
		case ">":
			return c > 0, nil
		case "<":
			return c < 0, nil
		case "≥", ">=":
			return c >= 0, nil
		}
		return c <= 0, nil
	}
	return false, fmt.Errorf("unknown comparison operator %q", op)
}

// expectedValue renders {{#…#}} references in a condition's value.
func (x *nodeRun) expectedValue(v any) any {
	if s, ok := v.(string); ok {
		return x.pool.Render(s)
	}
	return v
}

// evalConditions evaluates a list of conditions joined by and/or.
func (x *nodeRun) evalConditions(logical string, conds []map[string]any, actualOf func(c map[string]any) any) (bool, []any, error) {
	var results []any
	or := logical == "or"
	all := !or
	for _, c := range conds {
		actual := actualOf(c)
		var ok bool
		var err error
		if sub := asMap(c["sub_variable_condition"]); sub != nil && len(asList2(sub["conditions"])) > 0 {
			ok, err = x.evalFiles(actual, sub)
		} else {
			ok, err = compare(asString(c["comparison_operator"]), actual, x.expectedValue(c["value"]))
		}
		if err != nil {
			return false, results, err
		}
		results = append(results, map[string]any{
			"actual_value": plain(actual), "expected_value": plain(x.expectedValue(c["value"])),
			"comparison_operator": c["comparison_operator"], "result": ok,
		})
		if or && ok {
			return true, results, nil
		}
		if !or && !ok {
			return false, results, nil
		}
	}
	return all && len(conds) > 0, results, nil
}

// evalFiles applies sub-conditions on file attributes: true when some
// file of the list matches them.
func (x *nodeRun) evalFiles(v any, sub map[string]any) (bool, error) {
	list, ok := asList(v)
	if !ok {
		list = []any{v}
	}
	for _, f := range list {
		ok, _, err := x.evalConditions(asString(sub["logical_operator"]), asList2(sub["conditions"]), func(c map[string]any) any {
			a, _ := walk(f, asString(c["key"]))
			return a
		})
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// runIfElse picks the first case whose conditions hold; the edge with its
// case id is followed, or "false" when none holds.
func runIfElse(x *nodeRun) (*outcome, error) {
	var trace []any
	for _, cs := range x.n.cfg.(*ifElseConfig).cases {
		id := cs.id
		ok, res, err := x.evalConditions(cs.logical, cs.conditions, func(c map[string]any) any {
			return x.get(selectorOf(c["variable_selector"]))
		})
		trace = append(trace, map[string]any{"case_id": id, "conditions": res, "result": ok})
		if err != nil {
			return &outcome{process: map[string]any{"condition_results": trace}}, nodeErr("IfElseNodeError", "%v", err)
		}
		if ok {
			return &outcome{
				process: map[string]any{"condition_results": trace},
				outputs: map[string]any{"result": true, "selected_case_id": id}, handle: id,
			}, nil
		}
	}
	return &outcome{
		process: map[string]any{"condition_results": trace},
		outputs: map[string]any{"result": false, "selected_case_id": "false"}, handle: "false",
	}, nil
}

// runListOperator filters, sorts, limits and picks items of an array.
func runListOperator(x *nodeRun) (*outcome, error) {
	cfg := x.n.cfg.(*listOperatorConfig)
	sel := cfg.variable
	v, found := x.pool.Get(sel)
	list, ok := asList(v)
	if !found || v == nil {
		list, ok = []any{}, true
	}
	if !ok {
		return nil, nodeErr("InvalidVariableError", "The list operator needs an array, and %s is a %s.", strings.Join(sel, "."), TypeOf(v))
	}
	inputs := map[string]any{"variable": plain(list)}
	items := slices.Clone(list)
	keyOf := func(item any, key string) any {
		if key == "" {
			return item
		}
		if a, ok := walk(item, key); ok {
			return a
		}
		return item
	}
	if cfg.filterOn {
		var kept []any
		for _, it := range items {
			ok, _, err := x.evalConditions("and", cfg.filter, func(c map[string]any) any {
				return keyOf(it, asString(c["key"]))
			})
			if err != nil {
				return nil, nodeErr("ListOperatorNodeError", "%v", err)
			}
			if ok {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if cfg.extract != nil {
		n, ok := jsonnum.Number(x.pool.Render(Text(cfg.extract)))
		if !ok || n < 1 || int(n) > len(items) {
			return nil, nodeErr("ListOperatorNodeError", "Cannot extract item %v of a list of %d.", cfg.extract, len(items))
		}
		items = []any{items[int(n)-1]}
	}
	if cfg.orderOn {
		key, desc := cfg.orderKey, cfg.desc
		slices.SortStableFunc(items, func(a, b any) int {
			ka, kb := keyOf(a, key), keyOf(b, key)
			var c int
			fa, okA := jsonnum.Number(ka)
			fb, okB := jsonnum.Number(kb)
			if okA && okB {
				c = cmp.Compare(fa, fb)
			} else {
				c = strings.Compare(Text(ka), Text(kb))
			}
			if desc {
				return -c
			}
			return c
		})
	}
	if cfg.limit >= 0 && cfg.limit < len(items) {
		items = items[:cfg.limit]
	}
	if items == nil {
		items = []any{}
	}
	var first, last any
	if len(items) > 0 {
		first, last = items[0], items[len(items)-1]
	}
	return &outcome{inputs: inputs, outputs: map[string]any{"result": items, "first_record": first, "last_record": last}}, nil
}
