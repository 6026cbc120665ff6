// Package apispec holds the API description the server validates requests
// against: the embedded openapi.yaml, parsed once per process (in parallel,
// as it is most of a start's CPU) and shared read-only by every server of
// the process.
package apispec

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"appkb/gen"
)

// Parsed returns the API description, parsed on the first call: parsing
// takes about 0.1 s of CPU (1 s under the race detector), and nothing
// writes to the parsed document, so every server of a process (the tests
// build hundreds) shares it as the requests of one server do.
var Parsed = sync.OnceValues(loadSpec)

// loadSpec parses the embedded openapi.yaml into the same document as
// gen.GetSpec, in less CPU and on several cores. kin-openapi decodes every
// object twice (its fields, then again as a generic map for extensions),
// the whole document at the top and the whole components object again
// below it; here the two big parts, paths and the component schemas, are
// cut out first and decoded piece by piece, on GOMAXPROCS goroutines, and
// only the small remainders go through the top-level decoders. References
// are then resolved by kin-openapi's loader, as GetSpec does.
// TestLoadSpecMatchesGenerated checks that both give the same document.
func loadSpec() (*openapi3.T, error) {
	raw, err := gen.GetSpecJSON()
	if err != nil {
		return nil, err
	}
	top, comps, rawPaths, rawSchemas, err := cutSpec(raw)
	if err != nil {
		return nil, err
	}

	// The jobs, largest first, so that the workers end together: paths
	// whole, then each schema.
	type job struct {
		name string
		raw  json.RawMessage
	}
	names := make([]string, 0, len(rawSchemas))
	for name := range rawSchemas {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return len(rawSchemas[names[i]]) > len(rawSchemas[names[j]]) })
	jobs := make(chan job, len(names)+1)
	if rawPaths != nil {
		jobs <- job{raw: rawPaths}
	}
	for _, name := range names {
		jobs <- job{name: name, raw: rawSchemas[name]}
	}
	close(jobs)

	paths := openapi3.NewPaths()
	schemas := make(openapi3.Schemas, len(names))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					fail(fmt.Errorf("parsing openapi.yaml panicked: %v", v))
				}
			}()
			for j := range jobs {
				if j.name == "" {
					if err := json.Unmarshal(j.raw, paths); err != nil {
						fail(fmt.Errorf("openapi.yaml paths: %w", err))
					}
					continue
				}
				ref := &openapi3.SchemaRef{}
				if err := json.Unmarshal(j.raw, ref); err != nil {
					fail(fmt.Errorf("openapi.yaml schema %s: %w", j.name, err))
					continue
				}
				mu.Lock()
				schemas[j.name] = ref
				mu.Unlock()
			}
		}()
	}

	// Meanwhile, the small remainders.
	var doc openapi3.T
	rest, err := json.Marshal(top)
	if err == nil {
		err = json.Unmarshal(rest, &doc)
	}
	var components openapi3.Components
	if err == nil && comps != nil {
		if rest, err = json.Marshal(comps); err == nil {
			err = json.Unmarshal(rest, &components)
		}
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if rawPaths != nil {
		doc.Paths = paths
	}
	if rawSchemas != nil {
		components.Schemas = schemas
	}
	if comps != nil {
		doc.Components = &components
	}
	if err := openapi3.NewLoader().ResolveRefsIn(&doc, nil); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return &doc, nil
}

// cutSpec cuts the document's JSON into what loadSpec decodes apart: the
// top level without paths and components, the components without their
// schemas, the paths, and each component schema.
func cutSpec(raw []byte) (top, comps map[string]json.RawMessage, rawPaths json.RawMessage, rawSchemas map[string]json.RawMessage, err error) {
	if err = json.Unmarshal(raw, &top); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	rawPaths = top["paths"]
	if c, ok := top["components"]; ok {
		if err = json.Unmarshal(c, &comps); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("openapi.yaml components: %w", err)
		}
	}
	delete(top, "paths")
	delete(top, "components")
	if s, ok := comps["schemas"]; ok {
		if err = json.Unmarshal(s, &rawSchemas); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("openapi.yaml schemas: %w", err)
		}
		delete(comps, "schemas")
	}
	return top, comps, rawPaths, rawSchemas, nil
}
