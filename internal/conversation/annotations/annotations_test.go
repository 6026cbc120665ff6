package annotations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

const appYAML = `version: 0.3.0
kind: app
app: {name: %s, mode: chat}
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
`

// newTestService opens a database with two apps.
func newTestService(t *testing.T, registry *llm.Registry) (*Service, string, string) {
	t.Helper()
	gdb := db.OpenTemp(t)
	store := apps.NewStore(gdb)
	var ids []string
	for _, name := range []string{"one", "two"} {
		app, err := store.Import(context.Background(), []byte(fmt.Sprintf(appYAML, name)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, app.ID)
	}
	s := NewService(gdb, registry)
	s.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Cleanup(s.Stop) // runners must be done before the database closes
	return s, ids[0], ids[1]
}

func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("error = %v, want %d %s", err, status, code)
	}
}

func TestList(t *testing.T) {
	s, appID, otherID := newTestService(t, nil)
	ctx := context.Background()
	for i := range 25 {
		if _, err := s.Create(ctx, appID, fmt.Sprintf("question %02d", i), fmt.Sprintf("answer %02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, qa := range [][2]string{{"What is 100% sure?", "Nothing."}, {"snake_case or camelCase?", "Either."}, {"Opening hours", "We open at NINE."}} {
		if _, err := s.Create(ctx, appID, qa[0], qa[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, otherID, "question of another app", "hidden"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		page, limit int
		keyword     string
		wantTotal   int64
		wantLen     int
		wantMore    bool
		wantLimit   int
		wantFirst   string
	}{
		{"first page, default size", 1, 0, "", 28, 20, true, 20, "Opening hours"},
		{"second page", 2, 20, "", 28, 8, false, 20, "question 07"},
		{"page past the end", 3, 20, "", 28, 0, false, 20, ""},
		{"page size over the maximum is reduced", 1, 1000, "", 28, 28, false, MaxPageSize, "Opening hours"},
		{"page below 1 reads as 1", 0, 5, "", 28, 5, true, 5, "Opening hours"},
		{"exact page boundary has no more", 7, 4, "", 28, 4, false, 4, "question 03"},
		{"keyword in the question", 1, 20, "question 1", 10, 10, false, 20, "question 19"},
		{"keyword in the answer, case ignored", 1, 20, "nine", 1, 1, false, 20, "Opening hours"},
		{"percent sign is literal", 1, 20, "100%", 1, 1, false, 20, "What is 100% sure?"},
		{"underscore is literal", 1, 20, "e_c", 1, 1, false, 20, "snake_case or camelCase?"},
		{"keyword without matches", 1, 20, "zebra", 0, 0, false, 20, ""},
		{"another app's annotations are not listed", 1, 20, "another app", 0, 0, false, 20, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.List(ctx, appID, tc.page, tc.limit, tc.keyword)
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != tc.wantTotal || len(p.Items) != tc.wantLen || p.HasMore != tc.wantMore || p.Limit != tc.wantLimit {
				t.Fatalf("total %d, %d items, has_more %v, limit %d", p.Total, len(p.Items), p.HasMore, p.Limit)
			}
			if tc.wantFirst != "" && p.Items[0].Question != tc.wantFirst {
				t.Errorf("first item %q, want %q", p.Items[0].Question, tc.wantFirst)
			}
		})
	}
}

func TestCreateUpdateDelete(t *testing.T) {
	s, appID, otherID := newTestService(t, nil)
	ctx := context.Background()
	a, err := s.Create(ctx, appID, "Q", "A")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.HitCount != 0 || a.CreatedAt.IsZero() {
		t.Fatalf("created %+v", a)
	}
	_, err = s.Create(ctx, appID, "  ", "A")
	wantCode(t, err, 400, apperr.CodeInvalidParam)
	_, err = s.Create(ctx, appID, "Q", "")
	wantCode(t, err, 400, apperr.CodeInvalidParam)

	u, err := s.Update(ctx, appID, a.ID, "Q2", "A2")
	if err != nil {
		t.Fatal(err)
	}
	if u.Question != "Q2" || u.Answer != "A2" || !u.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("updated %+v", u)
	}
	_, err = s.Update(ctx, otherID, a.ID, "Q3", "A3")
	wantCode(t, err, 404, apperr.CodeNotFound)
	_, err = s.Update(ctx, appID, "3f8c1c9e-0000-4000-8000-000000000000", "Q3", "A3")
	wantCode(t, err, 404, apperr.CodeNotFound)

	wantCode(t, s.Delete(ctx, otherID, a.ID), 404, apperr.CodeNotFound)
	if err := s.Delete(ctx, appID, a.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.Delete(ctx, appID, a.ID), 404, apperr.CodeNotFound)
}

// waitJob waits for the background runners and returns the job as stored.
func waitJob(t *testing.T, s *Service, appID, action, id string) *models.AnnotationReplyJob {
	t.Helper()
	s.resumeOnce()
	s.jobs.wg.Wait()
	job, err := s.Job(context.Background(), appID, action, id)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func countVectors(t *testing.T, gdb *gorm.DB, appID string) int64 {
	t.Helper()
	var n int64
	if err := gdb.Model(&models.AnnotationEmbedding{}).Where("app_id = ?", appID).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestJobLifecycle(t *testing.T) {
	strict, err := llm.Parse(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	s, appID, otherID := newTestService(t, strict)
	ctx := context.Background()
	for i := range 40 { // more than one embedding batch
		if _, err := s.Create(ctx, appID, fmt.Sprintf("question %d", i), "answer"); err != nil {
			t.Fatal(err)
		}
	}
	builtin := ReplyConfig{EmbeddingProviderName: "appkb", EmbeddingModelName: "builtin", ScoreThreshold: 0.8}

	t.Run("enable embeds every question and switches the feature on", func(t *testing.T) {
		job, err := s.StartJob(ctx, appID, ActionEnable, builtin)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != models.JobWaiting {
			t.Errorf("a new job is %q, want waiting", job.Status)
		}
		done := waitJob(t, s, appID, ActionEnable, job.ID)
		if done.Status != models.JobCompleted || done.ErrorMsg != "" {
			t.Fatalf("job %+v", done)
		}
		set, err := s.Settings(ctx, appID)
		if err != nil || !set.Enabled || set.ScoreThreshold != 0.8 || set.EmbeddingProviderName != "appkb" {
			t.Fatalf("settings %+v (%v)", set, err)
		}
		if n := countVectors(t, s.db, appID); n != 40 {
			t.Errorf("%d vectors, want 40", n)
		}
	})

	t.Run("the status of a job asks for its own app and action", func(t *testing.T) {
		var job models.AnnotationReplyJob
		if err := s.db.Where("app_id = ?", appID).Take(&job).Error; err != nil {
			t.Fatal(err)
		}
		_, err := s.Job(ctx, otherID, ActionEnable, job.ID)
		wantCode(t, err, 400, apperr.CodeInvalidParam)
		_, err = s.Job(ctx, appID, ActionDisable, job.ID)
		wantCode(t, err, 400, apperr.CodeInvalidParam)
		_, err = s.Job(ctx, appID, ActionEnable, "3f8c1c9e-0000-4000-8000-000000000000")
		wantCode(t, err, 400, apperr.CodeInvalidParam)
	})

	t.Run("an unfinished job is returned again instead of a second one", func(t *testing.T) {
		mu := s.jobs.lock(otherID)
		mu.Lock() // hold the runner back
		first, err := s.StartJob(ctx, otherID, ActionEnable, builtin)
		if err != nil {
			mu.Unlock()
			t.Fatal(err)
		}
		second, err := s.StartJob(ctx, otherID, ActionEnable, builtin)
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if first.ID != second.ID {
			t.Errorf("two jobs %s and %s", first.ID, second.ID)
		}
		if done := waitJob(t, s, otherID, ActionEnable, first.ID); done.Status != models.JobCompleted {
			t.Errorf("job %+v", done)
		}
	})

	t.Run("an unknown provider ends the job in error", func(t *testing.T) {
		job, err := s.StartJob(ctx, appID, ActionEnable, ReplyConfig{EmbeddingProviderName: "nowhere", EmbeddingModelName: "x", ScoreThreshold: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		done := waitJob(t, s, appID, ActionEnable, job.ID)
		if done.Status != models.JobError || !strings.Contains(done.ErrorMsg, "nowhere") {
			t.Fatalf("job %+v", done)
		}
		// The earlier setting stays in force.
		if set, _ := s.Settings(ctx, appID); !set.Enabled || set.EmbeddingProviderName != "appkb" {
			t.Errorf("settings %+v", set)
		}
	})

	t.Run("disable switches the feature off and drops the vectors", func(t *testing.T) {
		job, err := s.StartJob(ctx, appID, ActionDisable, builtin)
		if err != nil {
			t.Fatal(err)
		}
		if done := waitJob(t, s, appID, ActionDisable, job.ID); done.Status != models.JobCompleted {
			t.Fatalf("job %+v", done)
		}
		if set, _ := s.Settings(ctx, appID); set.Enabled {
			t.Error("still enabled")
		}
		if n := countVectors(t, s.db, appID); n != 0 {
			t.Errorf("%d vectors left", n)
		}
	})

	t.Run("bad requests are refused before a job is made", func(t *testing.T) {
		for _, tc := range []struct {
			action string
			cfg    ReplyConfig
		}{
			{"toggle", builtin},
			{ActionEnable, ReplyConfig{EmbeddingProviderName: "appkb", ScoreThreshold: 1.5}},
			{ActionEnable, ReplyConfig{EmbeddingProviderName: "appkb", ScoreThreshold: -0.1}},
			{ActionEnable, ReplyConfig{EmbeddingProviderName: " ", ScoreThreshold: 0.5}},
		} {
			_, err := s.StartJob(ctx, appID, tc.action, tc.cfg)
			wantCode(t, err, 400, apperr.CodeInvalidParam)
		}
	})
}

func TestUnfinishedJobsAreResumed(t *testing.T) {
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	app, err := apps.NewStore(gdb).Import(ctx, []byte(fmt.Sprintf(appYAML, "resume")))
	if err != nil {
		t.Fatal(err)
	}
	// The state a stopped process leaves behind: a job caught while
	// running, one not started yet, and one that was interrupted too often.
	if err := gdb.Create(&models.Annotation{AppID: app.ID, Question: "q", Answer: "a"}).Error; err != nil {
		t.Fatal(err)
	}
	rows := []models.AnnotationReplyJob{
		{AppID: app.ID, Action: ActionEnable, Status: models.JobProcessing, EmbeddingProviderName: "appkb", ScoreThreshold: 0.5, Attempts: 1},
		{AppID: app.ID, Action: ActionEnable, Status: models.JobProcessing, EmbeddingProviderName: "appkb", ScoreThreshold: 0.6, Attempts: maxAttempts},
		{AppID: app.ID, Action: ActionDisable, Status: models.JobWaiting},
	}
	for i := range rows {
		rows[i].CreatedAt = time.Now().Add(time.Duration(i) * time.Second)
		if err := gdb.Create(&rows[i]).Error; err != nil {
			t.Fatal(err)
		}
	}
	s := NewService(gdb, nil)
	s.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Cleanup(s.Stop)
	want := []string{models.JobCompleted, models.JobError, models.JobCompleted}
	for i, r := range rows {
		job := waitJob(t, s, app.ID, r.Action, r.ID) // the first use resumes
		if job.Status != want[i] {
			t.Errorf("job %d is %q (%s), want %q", i, job.Status, job.ErrorMsg, want[i])
		}
	}
	// They ran in order: the last one switched the feature off.
	if set, _ := s.Settings(ctx, app.ID); set.Enabled {
		t.Error("the disable job should have run last")
	}
}

func TestMatch(t *testing.T) {
	s, appID, otherID := newTestService(t, nil)
	ctx := context.Background()
	reset, err := s.Create(ctx, appID, "How do I reset my password?", "Use the 'Forgot password' link.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, appID, "What are your opening hours?", "Nine to five."); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, otherID, "How do I reset my password?", "Not this app's answer."); err != nil {
		t.Fatal(err)
	}

	if _, _, ok, err := s.Match(ctx, appID, "How do I reset my password?"); ok || err != nil {
		t.Fatalf("matched while annotation reply is off (ok %v, err %v)", ok, err)
	}
	enable := func(threshold float64) {
		t.Helper()
		job, err := s.StartJob(ctx, appID, ActionEnable, ReplyConfig{EmbeddingProviderName: "appkb", EmbeddingModelName: "builtin", ScoreThreshold: threshold})
		if err != nil {
			t.Fatal(err)
		}
		if done := waitJob(t, s, appID, ActionEnable, job.ID); done.Status != models.JobCompleted {
			t.Fatalf("job %+v", done)
		}
	}
	enable(0.8)

	// Added after the job: stored without a vector and embedded by Match.
	late := models.Annotation{AppID: appID, Question: "Do you ship to Portugal?", Answer: "Yes, in three days."}
	if err := s.db.Omit("embedding").Create(&late).Error; err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		query      string
		wantAnswer string // empty: no match
	}{
		{"the same question", "How do I reset my password?", "Use the 'Forgot password' link."},
		{"the same question in other case and spacing", "how do  i reset my password?", "Use the 'Forgot password' link."},
		{"a question added after the job", "Do you ship to Portugal?", "Yes, in three days."},
		{"an unrelated question", "Which wine goes with fish?", ""},
		{"a loosely related question stays under the threshold", "password", ""},
		{"an empty query", "   ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, answer, ok, err := s.Match(ctx, appID, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.wantAnswer != "") || answer != tc.wantAnswer || (ok && id == "") {
				t.Errorf("Match = %q, %q, %v", id, answer, ok)
			}
		})
	}

	var a models.Annotation
	if err := s.db.Where("id = ?", reset.ID).Take(&a).Error; err != nil {
		t.Fatal(err)
	}
	if a.HitCount != 2 {
		t.Errorf("hit_count %d, want 2", a.HitCount)
	}
	hits, err := s.HitHistory(ctx, appID, reset.ID)
	if err != nil || len(hits) != 2 || hits[0].AnnotationAnswer != reset.Answer || hits[0].Score < 0.8 {
		t.Errorf("hits %+v (%v)", hits, err)
	}

	t.Run("a threshold of 1 needs the same words", func(t *testing.T) {
		enable(1)
		if _, _, ok, _ := s.Match(ctx, appID, "How do I reset my password, please?"); ok {
			t.Error("matched a different text at threshold 1")
		}
		// The builtin model ignores case and runs of spaces.
		if _, _, ok, _ := s.Match(ctx, appID, "how do  i reset my password?"); !ok {
			t.Error("the same text should still match")
		}
	})

	t.Run("a changed question is embedded again", func(t *testing.T) {
		enable(0.8)
		if _, err := s.Update(ctx, appID, reset.ID, "Where is my invoice?", "In your account."); err != nil {
			t.Fatal(err)
		}
		if _, _, ok, _ := s.Match(ctx, appID, "How do I reset my password?"); ok {
			t.Error("the old question still matches")
		}
		if _, answer, ok, _ := s.Match(ctx, appID, "Where is my invoice?"); !ok || answer != "In your account." {
			t.Errorf("the new question does not match: %q", answer)
		}
	})
}

func TestRoundThreshold(t *testing.T) {
	for _, f := range []float32{0, 0.8, 0.95, 1} {
		if got := RoundThreshold(f); fmt.Sprint(got) != fmt.Sprint(f) {
			t.Errorf("RoundThreshold(%v) = %v", f, got)
		}
	}
}

func TestVectorEncoding(t *testing.T) {
	v := decodeVector(encodeVector([]float32{3, 4}))
	if len(v) != 2 || v[0] != 0.6 || v[1] != 0.8 {
		t.Errorf("got %v", v)
	}
	if z := decodeVector(encodeVector([]float32{0, 0})); z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector became %v", z)
	}
}

// TestSettingsFollowChanges checks that cached reply settings follow rows
// written behind the service's back (another process, a restore).
func TestSettingsFollowChanges(t *testing.T) {
	s, appID, _ := newTestService(t, nil)
	ctx := context.Background()
	steps := []struct {
		name, sql   string
		wantEnabled bool
	}{
		{"no row: switched off", "", false},
		{"a row is inserted", "INSERT INTO annotation_reply_settings (app_id, enabled, embedding_provider_name, created_at, updated_at) VALUES (?, TRUE, 'appkb', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)", true},
		{"the row is switched off", "UPDATE annotation_reply_settings SET enabled = FALSE WHERE app_id = ?", false},
		{"the row is switched on", "UPDATE annotation_reply_settings SET enabled = TRUE WHERE app_id = ?", true},
		{"the row is deleted", "DELETE FROM annotation_reply_settings WHERE app_id = ?", false},
	}
	for _, st := range steps {
		if st.sql != "" {
			if err := s.db.Exec(st.sql, appID).Error; err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		for range 2 { // the second read may come from the cache
			set, err := s.Settings(ctx, appID)
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if set.Enabled != st.wantEnabled {
				t.Errorf("%s: enabled %v, want %v", st.name, set.Enabled, st.wantEnabled)
			}
		}
	}
}
