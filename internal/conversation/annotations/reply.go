package annotations

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/db"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/models"
)

// Actions of the annotation reply switch.
const (
	ActionEnable  = "enable"
	ActionDisable = "disable"
)

// maxAttempts is how often a job is started before it is given up: a job
// that keeps being interrupted (the process stops while it runs) ends in
// error instead of being retried forever.
const maxAttempts = 3

// embedBatch is how many questions go into one embedding call.
const embedBatch = 32

// ReplyConfig is what switching annotation reply on needs.
type ReplyConfig struct {
	EmbeddingProviderName string
	EmbeddingModelName    string
	// ScoreThreshold is the smallest cosine similarity, between 0 and 1,
	// at which an annotation answers a query.
	ScoreThreshold float64
}

// Settings returns appID's annotation reply settings; an app that never
// had them has a zero value with Enabled false.
func (s *Service) Settings(ctx context.Context, appID string) (models.AnnotationReplySetting, error) {
	s.resumeOnce()
	set, _, err := s.settings.Get(ctx, appID, func(ctx context.Context) (models.AnnotationReplySetting, bool, error) {
		set := models.AnnotationReplySetting{AppID: appID}
		err := s.db.WithContext(ctx).Where("app_id = ?", appID).Take(&set).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			// No row is an answer too (switched off), cached like one:
			// the row's insert moves the counter.
			return models.AnnotationReplySetting{AppID: appID}, true, nil
		}
		return set, err == nil, err
	})
	return set, err
}

// StartJob records a job that switches annotation reply on or off for
// appID and starts it in the background. While a job with the same action
// is still unfinished for the app, that job is returned instead of a new
// one. Jobs of one app run one at a time, in the order they were made.
func (s *Service) StartJob(ctx context.Context, appID, action string, cfg ReplyConfig) (*models.AnnotationReplyJob, error) {
	if action != ActionEnable && action != ActionDisable {
		return nil, apperr.InvalidParam("action must be enable or disable")
	}
	if math.IsNaN(cfg.ScoreThreshold) || cfg.ScoreThreshold < 0 || cfg.ScoreThreshold > 1 {
		return nil, apperr.InvalidParam("score_threshold must be between 0 and 1")
	}
	cfg.EmbeddingProviderName = strings.TrimSpace(cfg.EmbeddingProviderName)
	cfg.EmbeddingModelName = strings.TrimSpace(cfg.EmbeddingModelName)
	if action == ActionEnable && cfg.EmbeddingProviderName == "" {
		return nil, apperr.InvalidParam("embedding_provider_name must not be empty")
	}
	s.resumeOnce()
	var job models.AnnotationReplyJob
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Where("app_id = ? AND action = ? AND status IN ?", appID, action, []string{models.JobWaiting, models.JobProcessing}).
			Order("created_at").Take(&job).Error
		if err == nil || !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		job = models.AnnotationReplyJob{
			AppID:                 appID,
			Action:                action,
			Status:                models.JobWaiting,
			EmbeddingProviderName: cfg.EmbeddingProviderName,
			EmbeddingModelName:    cfg.EmbeddingModelName,
			ScoreThreshold:        cfg.ScoreThreshold,
		}
		return tx.Create(&job).Error
	})
	if err != nil {
		return nil, err
	}
	s.kick(appID)
	return &job, nil
}

// Job returns one of appID's jobs started with action. A job that does not
// exist, belongs to another app or was started with the other action
// gives 400 invalid_param, as Dify answers.
func (s *Service) Job(ctx context.Context, appID, action, jobID string) (*models.AnnotationReplyJob, error) {
	s.resumeOnce()
	var job models.AnnotationReplyJob
	err := s.db.WithContext(ctx).Where("id = ? AND app_id = ? AND action = ?", jobID, appID, action).Take(&job).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.InvalidParam("The job does not exist.")
	}
	if err != nil {
		return nil, err
	}
	return &job, nil
}

// jobRunner runs the annotation reply jobs of one Service in the
// background: one runner per app at a time, all of them on the context
// Start gave (or, before Start, on one nobody cancels) and awaited by Stop.
type jobRunner struct {
	mu     sync.Mutex
	locks  map[string]*sync.Mutex // one per app id
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// resumed makes the first use resume the jobs a stopped process left.
	resumed sync.Once
}

// lock is the mutex that keeps appID to one runner.
func (j *jobRunner) lock(appID string) *sync.Mutex {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.locks == nil {
		j.locks = map[string]*sync.Mutex{}
	}
	mu, ok := j.locks[appID]
	if !ok {
		mu = &sync.Mutex{}
		j.locks[appID] = mu
	}
	return mu
}

// context is what runners run on.
func (j *jobRunner) context() context.Context {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.base == nil {
		return context.Background()
	}
	return j.base
}

// Start runs background jobs on ctx from now on and starts again the
// jobs a stopped process left unfinished. On a shared database it also
// looks, every Replica.Heartbeat, for jobs of replicas that died and for
// waiting jobs no runner has picked up (their replica died before), and
// runs them.
func (s *Service) Start(ctx context.Context) {
	j := s.jobs
	j.mu.Lock()
	if j.cancel != nil {
		j.mu.Unlock()
		return
	}
	j.base, j.cancel = context.WithCancel(ctx)
	base := j.base
	j.mu.Unlock()
	s.resumeOnce()
	if s.Replica.Shared() {
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			s.takeOver(base, s.Replica.Heartbeat)
		}()
	}
}

// takeOver resumes, every interval, what dead replicas left (see Resume).
func (s *Service) takeOver(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = cluster.DefaultHeartbeat
	}
	cluster.Every(ctx, interval, func(ctx context.Context) {
		if err := s.Resume(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error("annotation reply: taking over jobs of dead replicas failed", "error", err)
		}
	})
}

// Stop cancels the running jobs and waits for their runners. A job cut
// short stays unfinished and runs again after the next start.
func (s *Service) Stop() {
	j := s.jobs
	j.mu.Lock()
	cancel := j.cancel
	j.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	j.wg.Wait()
}

// Resume puts jobs left processing by a stopped process back to waiting
// and starts a runner for every app whose next job waits. When the
// Service is alone on its database (no shared Replica) every processing
// job is put back, so call Resume before this Service runs jobs: Start
// (or, without it, the first use of the Service) does this by itself. On
// a shared database only the jobs of dead replicas are put back, and
// Start repeats Resume periodically.
func (s *Service) Resume(ctx context.Context) error {
	err := s.db.WithContext(ctx).Exec(`UPDATE annotation_reply_jobs SET status = ?, replica_id = NULL, updated_at = ?
		WHERE status = ? AND ?`, models.JobWaiting, time.Now().UTC(), models.JobProcessing, s.Replica.Interrupted("replica_id")).Error
	if err != nil {
		return err
	}
	var appIDs []string
	err = s.db.WithContext(ctx).Model(&models.AnnotationReplyJob{}).
		Where("status = ? AND app_id NOT IN (?)", models.JobWaiting,
			s.db.Model(&models.AnnotationReplyJob{}).Select("app_id").Where("status = ?", models.JobProcessing)).
		Distinct().Pluck("app_id", &appIDs).Error
	if err != nil {
		return err
	}
	for _, id := range appIDs {
		s.kick(id)
	}
	return nil
}

// resumeOnce runs Resume the first time this Service is used.
func (s *Service) resumeOnce() {
	s.jobs.resumed.Do(func() {
		if err := s.Resume(s.jobs.context()); err != nil {
			s.Log.Error("annotation reply: resuming unfinished jobs failed", "error", err)
		}
	})
}

// kick starts a runner that works through appID's unfinished jobs.
func (s *Service) kick(appID string) {
	ctx := s.jobs.context()
	if ctx.Err() != nil {
		return // stopping: the job runs after the next start
	}
	s.jobs.wg.Add(1)
	go func() {
		defer s.jobs.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				s.Log.Error("annotation reply: job runner panicked", "app_id", appID, "panic", r)
			}
		}()
		mu := s.jobs.lock(appID)
		mu.Lock()
		defer mu.Unlock()
		for ctx.Err() == nil {
			job, ok, err := s.claim(ctx, appID)
			if err != nil {
				s.Log.Error("annotation reply: claiming a job failed", "app_id", appID, "error", err)
				return
			}
			if !ok || !s.runJob(ctx, job) {
				return
			}
		}
	}()
}

// claim takes appID's next job: the oldest unfinished one, if it is
// waiting. One statement marks it processing by this replica and counts
// the attempt. On PostgreSQL the row is locked with SKIP LOCKED, so that a
// runner of another replica claiming at the same moment gets nothing
// (the next job is not the oldest unfinished one while this one is), and
// one app's jobs still run one at a time, in order, across replicas.
func (s *Service) claim(ctx context.Context, appID string) (*models.AnnotationReplyJob, bool, error) {
	lock := ""
	if db.IsPostgres(s.db) {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var ids []string
	err := s.db.WithContext(ctx).Raw(`UPDATE annotation_reply_jobs SET status = ?, attempts = attempts + 1, replica_id = ?, updated_at = ?
		WHERE status = ? AND id = (SELECT j.id FROM annotation_reply_jobs j
			WHERE j.app_id = ? AND j.status = ? AND NOT EXISTS (SELECT 1 FROM annotation_reply_jobs e
				WHERE e.app_id = j.app_id AND e.status IN ?
				AND (e.created_at < j.created_at OR (e.created_at = j.created_at AND e.id < j.id)))
			ORDER BY j.created_at, j.id LIMIT 1`+lock+`)
		RETURNING id`,
		models.JobProcessing, s.Replica.OwnerID(), time.Now().UTC(), models.JobWaiting,
		appID, models.JobWaiting, []string{models.JobWaiting, models.JobProcessing}).Scan(&ids).Error
	if err != nil || len(ids) == 0 {
		return nil, false, err
	}
	var job models.AnnotationReplyJob
	if err := s.db.WithContext(ctx).Take(&job, "id = ?", ids[0]).Error; err != nil {
		return nil, false, err
	}
	return &job, true, nil
}

// runJob runs one claimed job to its end and records the outcome. It
// reports false when the outcome could not be recorded, so that the runner
// stops rather than picking the same job again.
func (s *Service) runJob(ctx context.Context, job *models.AnnotationReplyJob) bool {
	if job.Attempts > maxAttempts {
		return s.finish(ctx, job, fmt.Errorf("the job was interrupted %d times", job.Attempts-1))
	}
	var err error
	switch job.Action {
	case ActionEnable:
		err = s.enable(ctx, job)
	case ActionDisable:
		err = s.disable(ctx, job)
	default:
		err = fmt.Errorf("unknown action %q", job.Action)
	}
	return s.finish(ctx, job, err)
}

// finish records a job as completed, or as failed with err.
func (s *Service) finish(ctx context.Context, job *models.AnnotationReplyJob, err error) bool {
	status, msg := models.JobCompleted, ""
	if err != nil {
		status, msg = models.JobError, jobErrorMessage(err)
		s.Log.Warn("annotation reply job failed", "job_id", job.ID, "app_id", job.AppID, "action", job.Action, "error", err)
	}
	if err := s.db.WithContext(ctx).Model(job).Updates(map[string]any{"status": status, "error_msg": msg}).Error; err != nil {
		s.Log.Error("annotation reply: recording job outcome failed", "job_id", job.ID, "error", err)
		return false
	}
	return true
}

// jobErrorMessage is what a client polling a failed job is told: the
// message of an API error (model errors are written for clients), or a
// generic text for anything else, which is only logged.
func jobErrorMessage(err error) string {
	if apperr.ClientFault(err) {
		return apperr.From(err).Message
	}
	return "The job failed; the server log has the details."
}

// enable embeds every question of the app with the job's model, then
// switches the app over to it and drops vectors of other models.
func (s *Service) enable(ctx context.Context, job *models.AnnotationReplyJob) error {
	model := modelKey{job.EmbeddingProviderName, job.EmbeddingModelName}
	var missing []string
	err := s.db.WithContext(ctx).Model(&models.Annotation{}).
		Where("app_id = ? AND NOT EXISTS (?)", job.AppID, s.vectorOf(model)).
		Order("created_at").Pluck("id", &missing).Error
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		embedder, err := s.models.Embedding(model.provider, model.name)
		if err != nil {
			return err
		}
		for start := 0; start < len(missing); start += embedBatch {
			var batch []models.Annotation
			ids := missing[start:min(start+embedBatch, len(missing))]
			if err := s.db.WithContext(ctx).Select("id", "app_id", "question").Where("id IN ?", ids).Find(&batch).Error; err != nil {
				return err
			}
			if err := s.embedAndStore(ctx, embedder, model, batch); err != nil {
				return err
			}
		}
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := saveJobSetting(tx, job, true, model.provider, model.name); err != nil {
			return err
		}
		return tx.Where("app_id = ? AND NOT (embedding_provider_name = ? AND embedding_model_name = ?)",
			job.AppID, model.provider, model.name).Delete(&models.AnnotationEmbedding{}).Error
	})
}

// saveJobSetting stores the app's annotation reply setting as job leaves
// it: on or off, with the given embedding model and the job's threshold.
func saveJobSetting(tx *gorm.DB, job *models.AnnotationReplyJob, enabled bool, provider, model string) error {
	return upsertSettings(tx, &models.AnnotationReplySetting{
		AppID:                 job.AppID,
		Enabled:               enabled,
		EmbeddingProviderName: provider,
		EmbeddingModelName:    model,
		ScoreThreshold:        job.ScoreThreshold,
	})
}

// disable switches annotation reply off and drops the app's vectors.
func (s *Service) disable(ctx context.Context, job *models.AnnotationReplyJob) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := saveJobSetting(tx, job, false, job.EmbeddingProviderName, job.EmbeddingModelName); err != nil {
			return err
		}
		return tx.Where("app_id = ?", job.AppID).Delete(&models.AnnotationEmbedding{}).Error
	})
}

func upsertSettings(tx *gorm.DB, set *models.AnnotationReplySetting) error {
	return tx.Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "app_id"}},
		DoUpdates: clause.AssignmentColumns([]string{
			"enabled", "embedding_provider_name", "embedding_model_name", "score_threshold", "updated_at",
		}),
	}).Create(set).Error
}

// RoundThreshold turns a threshold that arrived as a float32 into the
// float64 with the same shortest decimal form (0.8, not 0.800000011920929).
func RoundThreshold(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return v
}

// modelKey names an embedding model.
type modelKey struct{ provider, name string }

// vectorOf is a subquery that finds an annotation's vector under a model;
// it is used inside NOT EXISTS with the outer table named annotations.
func (s *Service) vectorOf(m modelKey) *gorm.DB {
	return s.db.Model(&models.AnnotationEmbedding{}).Select("1").
		Where("annotation_embeddings.annotation_id = annotations.id AND embedding_provider_name = ? AND embedding_model_name = ?", m.provider, m.name)
}

// encodeVector scales v to unit length and packs it as little-endian
// float32s. A zero vector stays zero.
func encodeVector(v []float32) []byte {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	norm := math.Sqrt(sum)
	out := make([]byte, 4*len(v))
	for i, x := range v {
		f := float64(x)
		if norm > 0 {
			f /= norm
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(f)))
	}
	return out
}

func decodeVector(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// dot is the cosine similarity of two unit vectors.
func dot(a, b []float32) float64 {
	var sum float64
	for i := range a {
		sum += float64(a[i]) * float64(b[i])
	}
	return sum
}
