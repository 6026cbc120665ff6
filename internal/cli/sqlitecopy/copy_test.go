package sqlitecopy_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/sqlitecopy"
	"appkb/internal/conversation/conversations"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// installation is a SQLite data directory with a bit of everything in it.
type installation struct {
	dir        string
	appID      string
	appKey     string
	kbKey      string
	datasetID  string
	documents  []document
	convID     string
	uploadID   string
	uploadData []byte
	runID      string
}

type document struct{ dataset, id string }

func buildInstallation(t *testing.T) *installation {
	t.Helper()
	ctx := context.Background()
	in := &installation{dir: t.TempDir()}
	gdb, err := db.Open(in.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)

	// Apps and keys, through their stores.
	store := apps.NewStore(gdb)
	store.Check = workflow.Check
	var appIDs []string
	for _, name := range []string{"chat.yml", "workflow.yml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "apps", name))
		if err != nil {
			t.Fatal(err)
		}
		app, err := store.Import(ctx, data)
		if err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		appIDs = append(appIDs, app.ID)
	}
	in.appID = appIDs[0]
	keys := apikeys.NewStore(gdb)
	if in.appKey, err = keys.CreateAppKey(ctx, in.appID, "chat key"); err != nil {
		t.Fatal(err)
	}
	revoked, err := keys.CreateAppKey(ctx, appIDs[1], "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Revoke(ctx, revoked[:12]); err != nil {
		t.Fatal(err)
	}

	// A knowledge base with a plain and a parent-child document, indexed
	// by the real worker (vectors from the builtin embedding model).
	actor := datasets.Actor{KeyID: "test"}
	technique := datasets.TechniqueHighQuality
	svc := documents.NewService(gdb, nil, in.dir)
	stop := documents.Start(ctx, documents.Config{DB: gdb, DataDir: in.dir, Poll: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	text := "Cats sleep in the sun.\nDogs bark at the mail.\n\nBirds sing at dawn.\nFish swim in circles."
	for i, rule := range []*textsplit.ProcessRule{
		{Mode: "custom", Rules: &textsplit.Rules{Segmentation: &textsplit.Segmentation{Separator: "\n", MaxTokens: 100}}},
		{Mode: "hierarchical", Rules: &textsplit.Rules{ParentMode: "paragraph"}},
	} {
		ds, err := datasets.NewStore(gdb, nil).CreateDataset(ctx, actor, datasets.CreateParams{Name: fmt.Sprint("kb ", i), IndexingTechnique: &technique})
		if err != nil {
			t.Fatal(err)
		}
		out, err := svc.CreateFromText(ctx, actor, ds.ID, "doc "+rule.Mode, text, documents.Settings{ProcessRule: rule})
		if err != nil {
			t.Fatal(err)
		}
		in.documents = append(in.documents, document{ds.ID, out.Document.ID})
		waitIndexed(t, svc, actor, ds.ID, out.Batch)
	}
	in.datasetID = in.documents[0].dataset
	if in.kbKey, err = keys.CreateKnowledgeKey(ctx, []string{in.datasetID}, "kb key"); err != nil {
		t.Fatal(err)
	}
	stop()
	// A disabled chunk, so that a false boolean travels too.
	if err := gdb.Exec(`UPDATE segments SET enabled = 0 WHERE position = 2 AND document_id = ?`, in.documents[0].id).Error; err != nil {
		t.Fatal(err)
	}

	// A conversation with two messages, a feedback and an uploaded file.
	name := "Ada"
	eu := &models.EndUser{AppID: in.appID, ExternalUserID: "ada", Type: "service-api", Name: &name, SessionID: "s1"}
	must(t, gdb.Create(eu).Error)
	conv := &models.Conversation{AppID: in.appID, EndUserID: eu.ID, Mode: "chat", Name: "Hello", Inputs: "{}", Status: "normal", DialogueCount: 2}
	must(t, gdb.Create(conv).Error)
	in.convID = conv.ID
	base := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	var last string
	for i, q := range []string{"Hello?", "And then?"} {
		m := &models.Message{AppID: in.appID, ConversationID: &conv.ID, EndUserID: eu.ID, TaskID: fmt.Sprint("task-", i),
			Query: q, Inputs: "{}", Answer: "Answer " + strconv.Itoa(i), MessageTokens: 3, AnswerTokens: 5, TotalTokens: 8,
			ProviderResponseLatency: 0.25, Status: "normal", MessageFiles: "[]", RetrieverResources: "[]", AgentThoughts: "[]",
			CreatedAt: base.Add(time.Duration(i) * time.Minute), UpdatedAt: base.Add(time.Duration(i) * time.Minute)}
		if i == 1 {
			m.ParentMessageID = &last
		}
		must(t, gdb.Create(m).Error)
		last = m.ID
	}
	must(t, gdb.Create(&models.MessageFeedback{AppID: in.appID, MessageID: last, EndUserID: eu.ID, Rating: "like"}).Error)
	in.uploadData = []byte("%PDF-1.4 not really\x00\x01\x02")
	up := &models.UploadFile{AppID: &in.appID, EndUserID: &eu.ID, Name: "a.pdf", Size: int64(len(in.uploadData)), Extension: "pdf", MimeType: "application/pdf"}
	up.ID = "3b8a1d2e-0000-4000-8000-000000000001"
	up.StorageKey = "files/" + up.ID
	must(t, os.MkdirAll(filepath.Join(in.dir, "files"), 0o755))
	must(t, os.WriteFile(filepath.Join(in.dir, "files", up.ID), in.uploadData, 0o644))
	// An upload still being written is not copied.
	must(t, os.WriteFile(filepath.Join(in.dir, "files", ".upload-123"), []byte("partial"), 0o644))
	must(t, gdb.Create(up).Error)
	in.uploadID = up.ID
	must(t, gdb.Create(&models.Annotation{AppID: in.appID, Question: "Q?", Answer: "A.", Embedding: []byte{1, 2, 3, 4}}).Error)

	// A finished workflow run with one node execution.
	ver := &models.WorkflowVersion{AppID: appIDs[1], DefinitionHash: "h", Definition: "{}", Version: "v1"}
	must(t, gdb.Create(ver).Error)
	outputs := `{"answer":"done"}`
	finished := base.Add(time.Second)
	run := &models.WorkflowRun{AppID: appIDs[1], WorkflowID: ver.ID, TaskID: "t", TriggeredFrom: "app-run", CreatedFrom: "service-api",
		Status: "succeeded", Inputs: "{}", Outputs: &outputs, ElapsedTime: 1.5, TotalSteps: 2, CreatedAt: base, FinishedAt: &finished}
	must(t, gdb.Create(run).Error)
	in.runID = run.ID
	must(t, gdb.Create(&models.WorkflowNodeExecution{WorkflowRunID: run.ID, NodeID: "start", NodeType: "start", NodeIndex: 1,
		Inputs: "{}", Status: "succeeded", ExecutionMetadata: "{}", CreatedAt: base, FinishedAt: &finished}).Error)
	return in
}

func waitIndexed(t *testing.T, svc *documents.Service, actor datasets.Actor, datasetID, batch string) {
	t.Helper()
	for range 1000 {
		st, err := svc.BatchStatus(context.Background(), actor, datasetID, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) > 0 && st[0].IndexingStatus == documents.StatusCompleted {
			return
		}
		if len(st) > 0 && st[0].IndexingStatus == documents.StatusError {
			t.Fatalf("indexing failed: %+v", st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("indexing did not finish")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// recorder keeps what a copy reports as progress.
type recorder struct {
	steps []string
	last  map[string]int64
	cur   string
}

func (r *recorder) Begin(name string, total int64) {
	r.steps, r.cur = append(r.steps, name), name
	if r.last == nil {
		r.last = map[string]int64{}
	}
}
func (r *recorder) Advance(done int64) { r.last[r.cur] = done }
func (r *recorder) End()               {}

func TestCopyIntoPostgres(t *testing.T) {
	url := db.TempURL(t)
	in := buildInstallation(t)
	ctx := context.Background()
	before := dumpSQLite(t, in.dir)

	pg, err := db.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(pg) })
	var progress recorder
	rep, err := sqlitecopy.Copy(ctx, in.dir, pg, sqlitecopy.Options{BatchRows: 3, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("every count matches and the populated tables were copied", func(t *testing.T) {
		if bad := rep.Mismatches(); len(bad) > 0 {
			t.Fatalf("mismatches: %+v", bad)
		}
		got := map[string]sqlitecopy.Count{}
		for _, c := range rep.Tables {
			got[c.Name] = c
		}
		for _, name := range []string{"apps", "api_keys", "api_key_datasets", "end_users", "conversations", "messages",
			"message_feedbacks", "upload_files", "annotations", "datasets", "documents", "segments", "child_chunks",
			"segment_embeddings", "workflow_versions", "workflow_runs", "workflow_node_executions", "cache_versions", sqlitecopy.FilesStep} {
			if got[name].Source == 0 {
				t.Errorf("%s: copied %d rows, the fixture has some", name, got[name].Source)
			}
		}
		// 1 upload + 2 document files; the half-written upload is left out.
		if c := got[sqlitecopy.FilesStep]; c.Source != 3 || c.Target != 3 {
			t.Errorf("files = %+v, want 3 on both sides", c)
		}
		if len(rep.Skipped) == 0 || !slices.Contains(rep.Skipped, "segments_fts") {
			t.Errorf("skipped = %v, want the FTS tables", rep.Skipped)
		}
		if len(rep.MissingFiles) != 0 {
			t.Errorf("missing files = %v", rep.MissingFiles)
		}
		if apps := slices.Index(rep.Tables, got["apps"]); apps > slices.Index(rep.Tables, got["api_keys"]) ||
			slices.Index(rep.Tables, got["segments"]) > slices.Index(rep.Tables, got["segment_embeddings"]) {
			t.Errorf("tables not in foreign-key order: %v", rep.Tables)
		}
		if progress.last["segments"] != got["segments"].Source || !slices.Contains(progress.steps, sqlitecopy.FilesStep) {
			t.Errorf("progress = %v %v", progress.steps, progress.last)
		}
	})

	t.Run("every table the migrations create is copied or knowingly skipped", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join("..", "..", "..", "db", "migrations", "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations: %v %v", files, err)
		}
		created := regexp.MustCompile(`(?i)CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)`)
		handled := slices.Clone(rep.Skipped)
		for _, c := range rep.Tables {
			handled = append(handled, c.Name)
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			must(t, err)
			for _, m := range created.FindAllStringSubmatch(string(body), -1) {
				name := m[1]
				if _, exists := before[name]; !exists && !slices.Contains(rep.Skipped, name) {
					continue // gone again by the newest migration
				}
				if !slices.Contains(handled, name) {
					t.Errorf("%s (created in %s) was neither copied nor skipped", name, filepath.Base(f))
				}
			}
		}
		for _, name := range rep.Skipped {
			if !strings.Contains(name, "_fts") {
				t.Errorf("skipped %s, which is not a full-text table", name)
			}
		}
	})

	t.Run("every row reads back equal", func(t *testing.T) {
		after := dumpPostgres(t, pg, before)
		for table, rows := range before {
			// A SQLite blobs table is empty (the files are on disk); on
			// PostgreSQL it now holds them, checked below.
			if table == "blobs" {
				continue
			}
			if !slices.Equal(rows, after[table]) {
				t.Errorf("%s differs:\nsqlite:   %v\npostgres: %v", table, rows, after[table])
			}
		}
	})

	t.Run("the stores work on the copy", func(t *testing.T) {
		p, err := apikeys.NewStore(pg).Authenticate(ctx, in.appKey)
		if err != nil || p.AppID != in.appID {
			t.Fatalf("app key: %+v %v", p, err)
		}
		p, err = apikeys.NewStore(pg).Authenticate(ctx, in.kbKey)
		if err != nil || !slices.Equal(p.Datasets, []string{in.datasetID}) {
			t.Fatalf("knowledge key: %+v %v", p, err)
		}
		var app models.App
		must(t, pg.Take(&app, "id = ?", in.appID).Error)
		hist, err := conversations.NewStore(pg).History(ctx, &app, "ada", in.convID, conversations.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(hist.Data) != 2 || hist.Data[0].Message.Query != "Hello?" || hist.Data[1].Message.Answer != "Answer 1" || hist.Data[1].Rating != "like" {
			t.Fatalf("history = %+v", hist.Data)
		}
		if got := hist.Data[0].Message.CreatedAt; !got.Equal(time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)) {
			t.Errorf("created_at = %v (microseconds kept)", got)
		}
		actor := datasets.Actor{KeyID: "test"}
		src, err := db.Open(in.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close(src)
		for _, doc := range in.documents {
			want, err := documents.NewService(src, nil, in.dir).ListSegments(ctx, actor, doc.dataset, doc.id, documents.SegmentQuery{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := documents.NewService(pg, nil, t.TempDir()).ListSegments(ctx, actor, doc.dataset, doc.id, documents.SegmentQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Data) != len(want.Data) || len(got.Data) == 0 {
				t.Fatalf("segments: %d on PostgreSQL, %d on SQLite", len(got.Data), len(want.Data))
			}
			for i := range want.Data {
				w, g := want.Data[i], got.Data[i]
				if g.ID != w.ID || g.Content != w.Content || g.Enabled != w.Enabled || g.Position != w.Position {
					t.Errorf("segment %d: %+v, want %+v", i, g, w)
				}
			}
		}
		// The copy fills PostgreSQL's generated full-text column.
		var matches int
		must(t, pg.Raw(`SELECT COUNT(*) FROM segments WHERE tsv @@ plainto_tsquery('english', 'birds')`).Scan(&matches).Error)
		if matches == 0 {
			t.Error("no chunk matches 'birds' in PostgreSQL's full-text column")
		}
		var disabled int
		must(t, pg.Raw(`SELECT COUNT(*) FROM segments WHERE NOT enabled`).Scan(&disabled).Error)
		if disabled != 1 {
			t.Errorf("disabled segments = %d, want 1", disabled)
		}
		var data []byte
		must(t, pg.Raw(`SELECT data FROM blobs WHERE key = ?`, "files/"+in.uploadID).Row().Scan(&data))
		if string(data) != string(in.uploadData) {
			t.Errorf("upload blob = %q", data)
		}
		var docBlobs int
		must(t, pg.Raw(`SELECT COUNT(*) FROM blobs WHERE key LIKE 'datasets/%'`).Scan(&docBlobs).Error)
		if docBlobs != 2 {
			t.Errorf("document blobs = %d, want 2", docBlobs)
		}
		var run models.WorkflowRun
		must(t, pg.Take(&run, "id = ?", in.runID).Error)
		if run.Status != "succeeded" || run.Outputs == nil || *run.Outputs != `{"answer":"done"}` || run.FinishedAt == nil {
			t.Errorf("run = %+v", run)
		}
	})

	t.Run("sequences continue after the copied values", func(t *testing.T) {
		for _, tbl := range []string{"segments", "child_chunks"} {
			var maxSeq, next int64
			must(t, pg.Raw(`SELECT COALESCE(MAX(seq), 0) FROM `+tbl).Scan(&maxSeq).Error)
			must(t, pg.Raw(`SELECT nextval(pg_get_serial_sequence(?, 'seq'))`, tbl).Scan(&next).Error)
			if maxSeq == 0 || next <= maxSeq {
				t.Errorf("%s: next seq %d, largest copied %d", tbl, next, maxSeq)
			}
		}
	})

	t.Run("a second copy into the same database is refused", func(t *testing.T) {
		_, err := sqlitecopy.Copy(ctx, in.dir, pg, sqlitecopy.Options{})
		var ne *sqlitecopy.NotEmptyError
		if !errors.As(err, &ne) || ne.Tables["apps"] != 2 {
			t.Fatalf("err = %v, want NotEmptyError naming apps", err)
		}
		if !strings.Contains(err.Error(), "apps (2 rows)") {
			t.Errorf("message = %q", err)
		}
	})

	t.Run("the source is unchanged", func(t *testing.T) {
		after := dumpSQLite(t, in.dir)
		for table, rows := range before {
			if !slices.Equal(rows, after[table]) {
				t.Errorf("%s changed in the source", table)
			}
		}
	})
}

func TestCopyRefusals(t *testing.T) {
	url := db.TempURL(t)
	pg, err := db.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(pg) })
	notDB := t.TempDir()
	tests := []struct {
		name, dir, want string
	}{
		{"missing directory", filepath.Join(notDB, "nope"), "no such file"},
		{"directory without a database", notDB, "holds no appkb database"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlitecopy.Copy(context.Background(), tc.dir, pg, sqlitecopy.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(tc.dir, db.FileName)); err == nil {
				t.Error("a database was created in the source directory")
			}
		})
	}
	t.Run("a SQLite target", func(t *testing.T) {
		src := buildEmpty(t)
		target, err := db.Open(t.TempDir())
		must(t, err)
		defer db.Close(target)
		_, err = sqlitecopy.Copy(context.Background(), src, target, sqlitecopy.Options{})
		if err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCopyRefusesOtherVersions(t *testing.T) {
	url := db.TempURL(t)
	pg, err := db.OpenPostgres(url)
	must(t, err)
	t.Cleanup(func() { db.Close(pg) })
	must(t, pg.Exec(`DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`).Error)
	_, err = sqlitecopy.Copy(context.Background(), buildEmpty(t), pg, sqlitecopy.Options{})
	if err == nil || !strings.Contains(err.Error(), "run the same appkb version on both") {
		t.Fatalf("err = %v, want a version refusal", err)
	}
}

func TestCopyNamesTheRowItCannotCopy(t *testing.T) {
	tests := []struct {
		name     string
		desc     string // description of the app named "bad"
		onTarget string // SQL run on the target first
		want     []string
	}{
		{"text PostgreSQL cannot hold", "a\x00b", "", []string{"copy apps: row id=app-bad, column description: text with a NUL character"}},
		{"a row the target refuses", "fine", `ALTER TABLE apps ADD CONSTRAINT not_bad CHECK (name <> 'bad')`,
			[]string{"copy apps: row id=app-bad:", "not_bad", "drop it and create it again"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := db.TempURL(t)
			pg, err := db.OpenPostgres(url)
			must(t, err)
			t.Cleanup(func() { db.Close(pg) })
			if tc.onTarget != "" {
				must(t, pg.Exec(tc.onTarget).Error)
			}
			dir := buildEmpty(t)
			src, err := db.Open(dir)
			must(t, err)
			for i, name := range []string{"good 1", "bad", "good 2"} {
				id, desc := fmt.Sprint("app-", i), ""
				if name == "bad" {
					id, desc = "app-bad", tc.desc
				}
				must(t, src.Exec(`INSERT INTO apps (id, name, mode, description, definition, created_at, updated_at)
					VALUES (?, ?, 'chat', ?, '{}', ?, ?)`, id, name, desc, time.Now(), time.Now()).Error)
			}
			db.Close(src)
			_, err = sqlitecopy.Copy(context.Background(), dir, pg, sqlitecopy.Options{})
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestCounterOnlyPostgresHasIsNoMismatch(t *testing.T) {
	url := db.TempURL(t)
	pg, err := db.OpenPostgres(url)
	must(t, err)
	t.Cleanup(func() { db.Close(pg) })
	must(t, pg.Exec(`INSERT INTO cache_versions (name, version) VALUES ('postgres_only', 7)`).Error)
	rep, err := sqlitecopy.Copy(context.Background(), buildEmpty(t), pg, sqlitecopy.Options{})
	must(t, err)
	if bad := rep.Mismatches(); len(bad) > 0 {
		t.Fatalf("mismatches: %+v", bad)
	}
	var n int
	must(t, pg.Raw(`SELECT COUNT(*) FROM cache_versions`).Scan(&n).Error)
	for _, c := range rep.Tables {
		if c.Name == "cache_versions" && (c.Source == 0 || int64(n) != c.Source+1) {
			t.Errorf("cache_versions: %+v, %d rows in PostgreSQL", c, n)
		}
	}
}

func buildEmpty(t *testing.T) string {
	dir := t.TempDir()
	gdb, err := db.Open(dir)
	must(t, err)
	db.Close(gdb)
	return dir
}

// A dump is, per table, every row as text in a canonical form, sorted: the
// same rows give the same dump on either engine.
type dump map[string][]string

func dumpSQLite(t *testing.T, dir string) dump {
	t.Helper()
	sdb, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, db.FileName)+"?_query_only=true")
	must(t, err)
	defer sdb.Close()
	rows, err := sdb.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
		AND name != 'schema_migrations' AND name NOT LIKE '%_fts' AND name NOT LIKE '%_fts_%'`)
	must(t, err)
	var tables []string
	for rows.Next() {
		var n string
		must(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	rows.Close()
	out := dump{}
	for _, tbl := range tables {
		out[tbl] = dumpTable(t, sdb, tbl, columnsOf(t, sdb, tbl))
	}
	return out
}

// dumpPostgres dumps the tables of like, with like's columns.
func dumpPostgres(t *testing.T, pg *gorm.DB, like dump) dump {
	t.Helper()
	sdb, err := pg.DB()
	must(t, err)
	out := dump{}
	for tbl := range like {
		out[tbl] = dumpTable(t, sdb, tbl, sqliteColumns[tbl])
	}
	return out
}

// sqliteColumns remembers each table's SQLite columns for the PostgreSQL
// dump.
var sqliteColumns = map[string][]string{}

func columnsOf(t *testing.T, sdb *sql.DB, tbl string) []string {
	rows, err := sdb.Query(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, tbl)
	must(t, err)
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		must(t, rows.Scan(&c))
		cols = append(cols, c)
	}
	sqliteColumns[tbl] = cols
	return cols
}

var timeText = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}`)

func dumpTable(t *testing.T, sdb *sql.DB, tbl string, cols []string) []string {
	t.Helper()
	rows, err := sdb.Query(`SELECT "` + strings.Join(cols, `", "`) + `" FROM "` + tbl + `"`)
	if err != nil {
		t.Fatalf("dump %s: %v", tbl, err)
	}
	defer rows.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		must(t, rows.Scan(ptrs...))
		parts := make([]string, len(cols))
		for i, v := range vals {
			parts[i] = cols[i] + "=" + canonical(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	sort.Strings(out)
	return out
}

// canonical writes a value the same way whichever engine returned it:
// booleans as 0/1, times in UTC to the microsecond (PostgreSQL's
// precision), bytes in hex.
func canonical(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "1"
		}
		return "0"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return x.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000Z")
	case []byte:
		return "x" + hex.EncodeToString(x)
	case string:
		if timeText.MatchString(x) {
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999"} {
				if tm, err := time.Parse(layout, x); err == nil {
					return canonical(tm)
				}
			}
		}
		return strconv.Quote(x)
	}
	return fmt.Sprintf("%T:%v", v, v)
}
