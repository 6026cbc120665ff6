package handlers

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"appkb/db"
	"appkb/gen"
	"appkb/handlers/validation"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

const notImplementedFile = "testdata/not_implemented.txt"

// TestNotImplementedOperations calls every operation of the API and lists
// those that still answer 501 not_implemented. The list is kept in
// testdata/not_implemented.txt so the remaining surface is visible in the
// repository; run with UPDATE_GOLDEN=1 to rewrite it after implementing one.
func TestNotImplementedOperations(t *testing.T) {
	gdb := db.OpenTemp(t)
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{apps: apps.NewStore(gdb)}
	ctx := validation.WithPrincipal(context.Background(), &apikeys.Principal{Kind: models.KeyKindApp, AppID: keys.AppID})

	iface := reflect.TypeOf((*gen.StrictServerInterface)(nil)).Elem()
	value := reflect.ValueOf(srv)
	var missing []string
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		fn := value.MethodByName(m.Name)
		reqType := m.Type.In(1)
		err := callRecovering(fn, ctx, reflect.Zero(reqType))
		if apperr.Is(err, apperr.CodeNotImplemented) {
			missing = append(missing, fmt.Sprintf("%-45s %s", m.Name, strings.TrimSuffix(apperr.From(err).Message, " is not implemented yet")))
		}
	}
	sort.Strings(missing)
	got := fmt.Sprintf("# Operations that answer 501 not_implemented (%d of %d)\n%s\n",
		len(missing), iface.NumMethod(), strings.Join(missing, "\n"))
	t.Logf("\n%s", got)

	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(notImplementedFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(notImplementedFile)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date (run with UPDATE_GOLDEN=1):\n%s", notImplementedFile, got)
	}
}

// callRecovering calls a strict handler method; a panic (a zero request is
// not what an implemented operation expects) counts as "implemented".
func callRecovering(fn reflect.Value, ctx context.Context, req reflect.Value) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	out := fn.Call([]reflect.Value{reflect.ValueOf(ctx), req})
	if e, ok := out[1].Interface().(error); ok {
		return e
	}
	return nil
}
