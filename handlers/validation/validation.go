package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cachever"
)

// Security scheme names in openapi.yaml, one per kind of key.
const (
	schemeAppKey       = "AppKey"
	schemeKnowledgeKey = "KnowledgeKey"
)

// Validator checks every request under /v1 against the embedded API
// description before a handler runs: the route and method, the bearer key,
// then parameters and body. It is the kin-openapi counterpart of
// oapi-codegen's echo-middleware, which cannot be used here.
type Validator struct {
	// router finds the service operations (under /v1), adminRouter the
	// admin ones (under /admin/v1, which openapi.yaml gives as their
	// paths' server).
	router      routers.Router
	adminRouter routers.Router
	// adminToken opens the admin operations; empty keeps them hidden.
	adminToken string
	// scenarioApps, set when scenarios script the built-in model, names
	// the app of each app-key request on its context, which scenario
	// rules match on.
	scenarioApps *apps.Store
	keys         *apikeys.Store
	// snapshots reads every cache counter once per request, for the key,
	// app, end-user and settings lookups that follow.
	snapshots *cachever.Snapshots
	// maxText bounds query and each input value, in characters (0: no
	// limit).
	maxText int
}

// Config is what a Validator checks requests with.
type Config struct {
	Keys *apikeys.Store
	// Snapshots reads every cache counter once per request.
	Snapshots *cachever.Snapshots
	// MaxText bounds query and each input value, in characters (0: no
	// limit).
	MaxText int
	// AdminToken opens the admin operations; empty keeps them hidden.
	AdminToken string
	// ScenarioApps, set when scenarios script the built-in model, names
	// the app of each app-key request on its context.
	ScenarioApps *apps.Store
}

// New builds the validator over the routers of the embedded spec (parsed
// once per process).
func New(cfg Config) (*Validator, error) {
	r, err := builtRouters()
	if err != nil {
		return nil, err
	}
	return &Validator{router: r.service, adminRouter: r.admin, keys: cfg.Keys, snapshots: cfg.Snapshots,
		maxText: cfg.MaxText, adminToken: cfg.AdminToken, scenarioApps: cfg.ScenarioApps}, nil
}

// splitSpec separates the admin operations (the paths whose own server is
// /admin/v1) from the service operations: kin-openapi's router reads only
// the document's servers, so each half gets a document of its own.
func splitSpec(spec *openapi3.T) (service, admin *openapi3.T) {
	s, a := *spec, *spec
	s.Paths, a.Paths = openapi3.NewPaths(), openapi3.NewPaths()
	a.Servers = openapi3.Servers{{URL: AdminBasePath}}
	for path, item := range spec.Paths.Map() {
		if len(item.Servers) > 0 && item.Servers[0].URL == AdminBasePath {
			a.Paths.Set(path, item)
		} else {
			s.Paths.Set(path, item)
		}
	}
	return &s, &a
}

// routerFor picks the router of the request's prefix, or none.
func (v *Validator) routerFor(path string) (routers.Router, bool) {
	switch {
	case path == BasePath || strings.HasPrefix(path, BasePath+"/"):
		return v.router, true
	case strings.HasPrefix(path, AdminBasePath+"/"):
		return v.adminRouter, true
	}
	return nil, false
}

// ctxRoute is where the operation a request under /v1 matched is kept, so
// that AuthFirst and the validator look it up once.
const ctxRoute = "appkb.route"

// ctxSnapshot marks a request whose cache counters have been read.
const ctxSnapshot = "appkb.snapshot"

// routeMatch is the operation a request under /v1 was matched to, or why
// none was.
type routeMatch struct {
	router routers.Router
	route  *routers.Route
	params map[string]string
	err    error
}

// match finds the operation of a request under /v1, once per request; nil
// for paths outside /v1.
func (v *Validator) match(c echo.Context) *routeMatch {
	if m, ok := c.Get(ctxRoute).(*routeMatch); ok {
		return m
	}
	req := c.Request()
	router, ok := v.routerFor(req.URL.Path)
	if !ok {
		return nil
	}
	var route *routers.Route
	var params map[string]string
	var err error
	if router == v.adminRouter && v.adminToken == "" {
		err = routers.ErrPathNotFound // the admin API is off
	} else {
		route, params, err = router.FindRoute(req)
	}
	m := &routeMatch{router: router, route: route, params: params, err: err}
	c.Set(ctxRoute, m)
	return m
}

// attachSnapshot reads the cache counters for the lookups of this request,
// once.
func (v *Validator) attachSnapshot(c echo.Context) {
	if c.Get(ctxSnapshot) != nil {
		return
	}
	c.Set(ctxSnapshot, true)
	req := c.Request()
	c.SetRequest(req.WithContext(v.snapshots.Attach(req.Context())))
}

// Middleware checks each request under /v1 and /admin/v1 before its
// handler runs.
func (v *Validator) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := v.match(c)
		if m == nil {
			return next(c)
		}
		req := c.Request()
		route, pathParams, err := m.route, m.params, m.err
		if err != nil {
			adminOff := m.router == v.adminRouter && v.adminToken == ""
			if !adminOff && v.pathKnown(m.router, req) {
				return echo.ErrMethodNotAllowed
			}
			return echo.ErrNotFound
		}
		if err := refuseNULInParams(req, pathParams); err != nil {
			return err
		}
		dropEmptyOptionalQuery(req, route)
		body, err := normalizeJSONBody(req, route.Operation, v.maxText)
		if err != nil {
			return err
		}
		v.attachSnapshot(c)
		req = c.Request()
		// AuthFirst has resolved the key already when it ran.
		early, _ := req.Context().Value(principalKey{}).(*apikeys.Principal)

		streamed, err := checkMediaType(req, route.Operation)
		if err != nil {
			return err
		}

		var principal *apikeys.Principal
		input := &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams,
			Route:      route,
			Options: &openapi3filter.Options{
				// Multipart bodies are read part by part by their handlers
				// (files go to disk as they arrive); the validator would
				// read the whole body into memory first.
				// A JSON body was decoded above; its schema is checked
				// on that value after the key and parameters.
				ExcludeRequestBody: streamed || body != nil,
				AuthenticationFunc: func(ctx context.Context, ai *openapi3filter.AuthenticationInput) error {
					var p *apikeys.Principal
					var err error
					if early != nil {
						p, err = early, keyKindFits(early, ai.SecuritySchemeName)
					} else {
						p, err = v.authenticate(ctx, ai.SecuritySchemeName, req)
					}
					if err == nil {
						err = keyMayUse(p, ai.SecuritySchemeName, pathParams)
					}
					if err == nil {
						principal = p
					}
					return err
				},
			},
		}
		// kin-openapi reads the whole body into memory while it checks the
		// security requirements, even with ExcludeRequestBody; a streamed
		// body is held back until it is done.
		if streamed {
			body := req.Body
			req.Body = http.NoBody
			err = openapi3filter.ValidateRequest(req.Context(), input)
			req.Body = body
		} else {
			err = openapi3filter.ValidateRequest(req.Context(), input)
		}
		if err == nil && body != nil {
			err = validateJSONBody(input, body)
		}
		if err != nil {
			return validationError(err)
		}
		ctx := WithPrincipal(req.Context(), principal)
		if v.scenarioApps != nil && principal != nil && principal.AppID != "" {
			name := ""
			if a, err := v.scenarioApps.Cached(ctx, principal.AppID); err == nil {
				name = a.Name
			}
			ctx = llm.WithApp(ctx, principal.AppID, name)
		}
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// dropEmptyOptionalQuery removes the optional query parameters sent with
// an empty value (`?status=`), which clients such as Dify's async SDK send
// for every filter they were not given: Dify reads them as not given, so
// they are dropped before validation and binding see them. A required
// parameter left empty still fails validation.
func dropEmptyOptionalQuery(req *http.Request, route *routers.Route) {
	if req.URL.RawQuery == "" || !strings.Contains(req.URL.RawQuery, "=") {
		return
	}
	query := req.URL.Query()
	dropped := false
	for name, values := range query {
		empty := true
		for _, v := range values {
			if v != "" {
				empty = false
			}
		}
		if !empty {
			continue
		}
		if p := queryParameter(route, name); p != nil && !p.Required {
			delete(query, name)
			dropped = true
		}
	}
	if dropped {
		req.URL.RawQuery = query.Encode()
		req.RequestURI = req.URL.RequestURI()
	}
}

// queryParameter finds a query parameter of the route's operation, or of
// its path item.
func queryParameter(route *routers.Route, name string) *openapi3.Parameter {
	if route.Operation != nil {
		if p := route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, name); p != nil {
			return p
		}
	}
	if route.PathItem != nil {
		return route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, name)
	}
	return nil
}

// checkMediaType refuses a form body sent to an operation that takes JSON
// with 415 (instead of a confusing message about a missing field), and
// reports whether the body is multipart, which the handler reads itself.
func checkMediaType(req *http.Request, op *openapi3.Operation) (streamed bool, err error) {
	if op.RequestBody == nil || op.RequestBody.Value == nil || req.Body == nil || req.Body == http.NoBody {
		return false, nil
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	content := op.RequestBody.Value.Content
	switch mt {
	case echo.MIMEMultipartForm, echo.MIMEApplicationForm:
		if content.Get(mt) != nil {
			return mt == echo.MIMEMultipartForm, nil
		}
		if content.Get(echo.MIMEApplicationJSON) != nil {
			return false, apperr.New(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				"This operation takes a JSON body (Content-Type: application/json), not %s.", mt)
		}
	}
	return false, nil
}

// CodeUnsupportedMediaType is the error code of a body of the wrong media type.
const CodeUnsupportedMediaType = "unsupported_media_type"

// pathKnown reports whether some other method is served at the request's path.
func (v *Validator) pathKnown(router routers.Router, req *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == req.Method {
			continue
		}
		probe := req.Clone(req.Context())
		probe.Method = m
		if _, _, err := router.FindRoute(probe); err == nil {
			return true
		}
	}
	return false
}

// validationError turns a kin-openapi failure into an API error whose
// message names the field at fault and why.
func validationError(err error) error {
	var secErr *openapi3filter.SecurityRequirementsError
	if errors.As(err, &secErr) {
		for _, e := range secErr.Errors {
			var ae *apperr.Error
			if errors.As(e, &ae) {
				return ae
			}
		}
		for _, e := range secErr.Errors {
			if !errors.Is(e, openapi3filter.ErrAuthenticationServiceMissing) {
				return apperr.From(e)
			}
		}
		return apperr.Unauthorized("Access token is invalid.")
	}
	var reqErr *openapi3filter.RequestError
	if errors.As(err, &reqErr) {
		return apperr.InvalidParam("%s", describeRequestError(reqErr))
	}
	return apperr.From(err)
}

func describeRequestError(e *openapi3filter.RequestError) string {
	where := "request body"
	if e.Parameter != nil {
		where = fmt.Sprintf("%s parameter %q", e.Parameter.In, e.Parameter.Name)
	}
	var se *openapi3.SchemaError
	if errors.As(e.Err, &se) {
		reason := se.Reason
		if se.Origin != nil {
			var inner *openapi3.SchemaError
			if errors.As(se.Origin, &inner) {
				se = inner
				reason = inner.Reason
			} else {
				reason = se.Origin.Error()
			}
		}
		if ptr := se.JSONPointer(); len(ptr) > 0 && e.Parameter == nil {
			where = fmt.Sprintf("field %q", strings.Join(ptr, "."))
		}
		return where + ": " + reason
	}
	var pe *openapi3filter.ParseError
	if errors.As(e.Err, &pe) {
		return where + ": " + pe.Reason
	}
	switch {
	case errors.Is(e.Err, openapi3filter.ErrInvalidRequired):
		return where + " is required"
	case errors.Is(e.Err, openapi3filter.ErrInvalidEmptyValue):
		return where + " must not be empty"
	case e.Err != nil:
		return where + ": " + firstLine(e.Err.Error())
	}
	return where + ": " + e.Reason
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// jsonBody is a JSON request body decoded once: the cleaned value, which
// the body schema is checked against, and the media type that describes
// it. Numbers are kept as json.Number, as kin-openapi decodes them.
type jsonBody struct {
	value any
	media *openapi3.MediaType
}

// normalizeJSONBody makes JSON bodies as forgiving as real clients need: an
// empty or literal null body counts as no body, and a null given for an
// optional field that the description does not mark nullable counts as
// absent. The cleaned body replaces the original for the handler too.
//
// Text fields that feed models are bounded too: query and each string input
// value may have at most maxText characters (0: no limit).
//
// It returns the decoded body when the operation takes JSON and one was
// sent, so that its schema is checked on this value (validateJSONBody)
// instead of kin-openapi decoding the body a second time; nil otherwise.
func normalizeJSONBody(req *http.Request, op *openapi3.Operation, maxText int) (*jsonBody, error) {
	if req.Body == nil || req.Body == http.NoBody || op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil, nil
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if mt != echo.MIMEApplicationJSON {
		return nil, nil
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, echo.ErrStatusRequestEntityTooLarge
		}
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, ae // cut off by the guard (too slow)
		}
		return nil, apperr.InvalidParam("request body could not be read")
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		setBody(req, nil)
		return nil, nil
	}
	value, err := decodeJSONValue(trimmed)
	if err != nil {
		return nil, apperr.InvalidParam("request body is not valid JSON: %v", err)
	}
	media := op.RequestBody.Value.Content.Get(echo.MIMEApplicationJSON)
	dropped := false
	if media != nil && media.Schema != nil {
		value = dropNulls(media.Schema.Value, value, &dropped)
	}
	if err := checkTextLimits(value, maxText); err != nil {
		return nil, err
	}
	// A NUL can only reach a JSON string as the escape \u0000.
	if bytes.Contains(trimmed, []byte(`u0000`)) {
		if field, found := findNUL(value, ""); found {
			return nil, NULError(fmt.Sprintf("field %q", field))
		}
	}
	if dropped {
		cleaned, err := json.Marshal(value)
		if err != nil {
			return nil, apperr.Internal(err)
		}
		setBody(req, cleaned)
	} else {
		setBody(req, trimmed)
	}
	if media == nil || media.Schema == nil {
		return nil, nil // kin-openapi refuses the media type
	}
	return &jsonBody{value: value, media: media}, nil
}

// decodeJSONValue decodes one JSON value, numbers as json.Number; anything
// after it is an error.
func decodeJSONValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return value, nil
}

// validateJSONBody checks a decoded JSON body against the operation's body
// schema as kin-openapi's ValidateRequestBody does: as a request (read-only
// properties refused), with defaults of absent properties filled in and
// written back into the body the handler reads.
func validateJSONBody(input *openapi3filter.RequestValidationInput, body *jsonBody) error {
	defaults := false
	err := body.media.Schema.Value.VisitJSON(body.value, openapi3.VisitAsRequest(),
		openapi3.DefaultsSet(func() { defaults = true }))
	if err != nil {
		return &openapi3filter.RequestError{Input: input, RequestBody: input.Route.Operation.RequestBody.Value,
			Reason: "doesn't match schema", Err: err}
	}
	if defaults {
		data, err := json.Marshal(body.value)
		if err != nil {
			return apperr.Internal(err)
		}
		setBody(input.Request, data)
	}
	return nil
}

// checkTextLimits refuses a body whose query, or one of whose string input
// values, is longer than max characters.
func checkTextLimits(body any, max int) error {
	obj, ok := body.(map[string]any)
	if max <= 0 || !ok {
		return nil
	}
	if q, ok := obj["query"].(string); ok && len(q) > max && utf8.RuneCountInString(q) > max {
		return apperr.InvalidParam("query is too long: at most %d characters are allowed", max)
	}
	if inputs, ok := obj["inputs"].(map[string]any); ok {
		for name, v := range inputs {
			if s, ok := v.(string); ok && len(s) > max && utf8.RuneCountInString(s) > max {
				return apperr.InvalidParam("inputs.%s is too long: at most %d characters are allowed", name, max)
			}
		}
	}
	return nil
}

// The NUL character (U+0000) is refused in every text a request carries:
// PostgreSQL cannot store it in a text column, so the same request would be
// stored on SQLite and fail on PostgreSQL. Refusing it up front gives both
// the same clear answer.

// refuseNULInParams refuses a path or query parameter that holds a NUL.
// Both arrive percent-encoded (the router's path parameters are the raw
// segments, and a URL cannot hold a raw control character), so a NUL is
// always written %00.
func refuseNULInParams(req *http.Request, pathParams map[string]string) error {
	for name, v := range pathParams {
		if strings.Contains(v, "%00") {
			return NULError(fmt.Sprintf("path parameter %q", name))
		}
	}
	if strings.Contains(req.URL.RawQuery, "%00") {
		for name, vs := range req.URL.Query() {
			for _, v := range vs {
				if strings.Contains(name, "\x00") || strings.Contains(v, "\x00") {
					return NULError(fmt.Sprintf("query parameter %q", name))
				}
			}
		}
	}
	return nil
}

// findNUL returns the dotted path of the first member name or string of a
// decoded JSON value that holds a NUL.
func findNUL(value any, at string) (string, bool) {
	join := func(key string) string {
		if at == "" {
			return key
		}
		return at + "." + key
	}
	switch v := value.(type) {
	case string:
		return at, strings.Contains(v, "\x00")
	case map[string]any:
		for key, member := range v {
			if strings.Contains(key, "\x00") {
				return join(key), true
			}
			if field, found := findNUL(member, join(key)); found {
				return field, true
			}
		}
	case []any:
		for i, item := range v {
			if field, found := findNUL(item, join(fmt.Sprint(i))); found {
				return field, true
			}
		}
	}
	return "", false
}

func NULError(where string) *apperr.Error {
	return apperr.InvalidParam("%s contains the NUL character (U+0000), which is not accepted in text.", where)
}

func setBody(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// dropNulls removes object members whose value is null where the schema does
// not allow null, so that "null" reads as "not given".
func dropNulls(schema *openapi3.Schema, value any, dropped *bool) any {
	if schema == nil {
		return value
	}
	switch v := value.(type) {
	case map[string]any:
		for key, member := range v {
			prop := propertySchema(schema, key)
			if member == nil {
				if prop == nil || !prop.Nullable {
					delete(v, key)
					*dropped = true
				}
				continue
			}
			v[key] = dropNulls(prop, member, dropped)
		}
	case []any:
		if schema.Items != nil {
			for i := range v {
				v[i] = dropNulls(schema.Items.Value, v[i], dropped)
			}
		}
	}
	return value
}

// propertySchema finds a property's schema, looking through allOf.
func propertySchema(schema *openapi3.Schema, name string) *openapi3.Schema {
	if p, ok := schema.Properties[name]; ok && p != nil {
		return p.Value
	}
	for _, sub := range schema.AllOf {
		if sub != nil && sub.Value != nil {
			if p := propertySchema(sub.Value, name); p != nil {
				return p
			}
		}
	}
	return nil
}
