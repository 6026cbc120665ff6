package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"appkb/handlers"
	"appkb/handlers/journal"
	"appkb/internal/admin"
	"appkb/internal/llm"
)

// doubleFlags are the serve flags of appkb as a stand-in for Dify in a
// client's tests: the admin API, injected faults, scripted model answers,
// a throwaway data directory, seeding and the keys file.
type doubleFlags struct {
	adminToken string
	faults     bool
	scenario   string
	journal    int
	ephemeral  bool
	seed       string
	keysOut    string
}

// defaultJournal is how many requests the journal keeps.
const defaultJournal = 1000

func addDoubleFlags(fs *flag.FlagSet) *doubleFlags {
	d := &doubleFlags{}
	fs.StringVar(&d.adminToken, "admin-token", os.Getenv("APPKB_ADMIN_TOKEN"),
		"bearer token that opens the admin API under /admin/v1 (apps, keys, knowledge bases, scenarios, the request\njournal, reset); empty leaves it off (env APPKB_ADMIN_TOKEN)")
	fs.BoolVar(&d.faults, "faults", envBool("APPKB_FAULTS"),
		"honour the X-Appkb-Fault request header (delay, status, cut-after, error-event), for testing clients;\nnever on by default (env APPKB_FAULTS=1)")
	fs.StringVar(&d.scenario, "scenario", os.Getenv("APPKB_SCENARIO"),
		"scenario file, YAML: rules that script the built-in model's answers, tool calls and failures (env APPKB_SCENARIO)")
	fs.IntVar(&d.journal, "journal", envInt("APPKB_JOURNAL", defaultJournal),
		"requests the admin API's journal keeps (GET /admin/v1/requests) (env APPKB_JOURNAL)")
	fs.BoolVar(&d.ephemeral, "ephemeral", envBool("APPKB_EPHEMERAL"),
		"keep the data in a new temporary directory, removed when the server stops (env APPKB_EPHEMERAL=1)")
	fs.StringVar(&d.seed, "seed", os.Getenv("APPKB_SEED"),
		"folder to load at start: every .yml/.yaml file is an app (DSL); every other file is a document of a\nknowledge base named after its folder (env APPKB_SEED)")
	fs.StringVar(&d.keysOut, "keys-out", os.Getenv("APPKB_KEYS_OUT"),
		"file to write, once the server is ready, as JSON: its URL and every key made at start (env APPKB_KEYS_OUT)")
	return d
}

// check refuses combinations that cannot work.
func (d *doubleFlags) check(databaseURL string) error {
	if d.ephemeral && databaseURL != "" {
		return usagef("--ephemeral keeps its data in a temporary directory; it cannot go with --database-url")
	}
	if d.journal < 0 {
		return usagef("--journal must not be negative")
	}
	return nil
}

// handlersAdmin is what the HTTP layer gets; models follows the scenario.
func (d *doubleFlags) handlersAdmin(models *llm.Registry) (handlers.Admin, error) {
	out := handlers.Admin{Token: d.adminToken, Faults: d.faults}
	var sc *llm.Scenario
	if d.scenario != "" {
		var err error
		if sc, err = llm.LoadScenario(d.scenario); err != nil {
			return out, fmt.Errorf("--scenario: %w", err)
		}
	}
	if sc != nil || d.adminToken != "" {
		out.Scenarios = llm.NewScenarios(sc)
		models.FollowScenarios(out.Scenarios)
	}
	if d.adminToken != "" && d.journal > 0 {
		out.Journal = journal.New(d.journal)
	}
	return out, nil
}

// seeded is what --seed made, for --keys-out.
type seeded struct {
	Apps      map[string]admin.App           `json:"apps"`
	Knowledge map[string]admin.KnowledgeBase `json:"knowledge"`
}

// seedFrom imports the apps and knowledge files of dir. Apps are keyed by
// file name without extension; knowledge bases by folder name ("seed" for
// the files at the top).
func seedFrom(ctx context.Context, svc *admin.Service, dir string) (*seeded, error) {
	out := &seeded{Apps: map[string]admin.App{}, Knowledge: map[string]admin.KnowledgeBase{}}
	docs := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != dir && strings.HasPrefix(e.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yml", ".yaml":
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			a, err := svc.ImportApp(ctx, data)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out.Apps[strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))] = *a
		default:
			kb := "seed"
			if rel, _ := filepath.Rel(dir, filepath.Dir(path)); rel != "." {
				kb = filepath.Base(filepath.Dir(path))
			}
			docs[kb] = append(docs[kb], path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--seed: %w", err)
	}
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var files []admin.Doc
		for _, path := range docs[name] {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			files = append(files, admin.Doc{Name: filepath.Base(path), File: f})
		}
		kb, err := svc.CreateKnowledgeBase(ctx, name, "", files)
		if err != nil {
			return nil, fmt.Errorf("--seed: knowledge base %s: %w", name, err)
		}
		out.Knowledge[name] = *kb
	}
	return out, nil
}

// writeKeys writes the keys file atomically and readable by its owner only.
func writeKeys(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
