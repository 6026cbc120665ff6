package documents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/docparse"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// MaxAttempts is how often a job may be started. A job that fails, panics or
// runs out of time ends at once with status error; MaxAttempts only matters
// for a job whose run was cut short by the process dying (out of memory,
// SIGKILL): it is quarantined (status error, with the reason kept) the next
// time it would start, so that a document that kills the server can do so
// at most twice and a restart never loops on it. A job interrupted by an
// orderly stop does not use up an attempt.
const MaxAttempts = 2

// BigDocument is the file size from which a document counts as big: while
// all but one worker are busy with big documents, the last one only takes
// small ones, so that a few big files never hold up every small one.
const BigDocument = 1 << 20

// batchSize is how many chunks are embedded and written per transaction.
const batchSize = 64

// wake nudges idle workers of every pool in the process after a job was
// queued; workers also poll, so a lost nudge only costs a poll interval.
var wake = make(chan struct{}, 1)

func notify() {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// enqueue queues a document for indexing, or queues it again under a new
// generation if a job exists.
func enqueue(tx *gorm.DB, documentID string) error {
	now := time.Now().UTC()
	return tx.Exec(`INSERT INTO indexing_jobs(document_id, state, generation, attempts, created_at, updated_at)
		VALUES (?, 'queued', 1, 0, ?, ?)
		ON CONFLICT(document_id) DO UPDATE SET state = 'queued', generation = indexing_jobs.generation + 1, attempts = 0,
			replica_id = NULL, updated_at = excluded.updated_at`,
		documentID, now, now).Error
}

// Config is what the workers need.
type Config struct {
	DB      *gorm.DB
	Models  *llm.Registry
	DataDir string
	// Workers is the number of documents indexed at once; 0 means 2.
	Workers int
	// Poll is how often idle workers look for jobs; 0 means 500ms.
	Poll time.Duration
	// Timeout bounds the indexing of one document (parsing, splitting,
	// embedding, writing); a document that takes longer ends as error. 0
	// means 15 minutes.
	Timeout time.Duration
	Logger  *slog.Logger
	// Replica is the process in the replica registry. Jobs it claims carry
	// its id; on a shared database (PostgreSQL) the jobs of replicas that
	// died are queued again, at start and every Replica.Heartbeat, and
	// only those. Without one the process is alone: every job found
	// running at start is queued again.
	Replica *cluster.Replica
}

// Start queues again the jobs a previous run left running (on a shared
// database: the jobs of dead replicas) and starts the workers. They run
// until ctx ends or stop is called; stop waits for them. A job interrupted
// by stop goes back to the queue.
func Start(ctx context.Context, cfg Config) (stop func()) {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &worker{svc: NewService(cfg.DB, cfg.Models, cfg.DataDir), log: cfg.Logger,
		timeout: cfg.Timeout, maxBig: max(cfg.Workers-1, 1), replica: cfg.Replica}
	if _, err := requeueInterrupted(ctx, cfg.DB, cfg.Replica); err != nil {
		cfg.Logger.Error("indexing: requeue interrupted jobs", "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if cfg.Replica.Shared() {
		// Replicas die while others run: their jobs are taken over.
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.takeOver(ctx, cfg.Replica.Heartbeat)
		}()
	}
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, cfg.Poll)
		}()
	}
	// Stored keywords that an older textsplit.Keywords computed are
	// rebuilt in the background (see rekeyword.go).
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				cfg.Logger.Error("indexing: keyword rebuild panicked", "panic", r)
			}
		}()
		if err := rebuildKeywords(ctx, cfg.DB, cfg.Logger); err != nil && ctx.Err() == nil {
			cfg.Logger.Error("indexing: keyword rebuild failed", "err", err)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

type worker struct {
	svc     *Service
	log     *slog.Logger
	timeout time.Duration
	replica *cluster.Replica

	// claim serialises claiming, so that big counts the big documents being
	// indexed exactly; at most maxBig run at once.
	claim  sync.Mutex
	big    int
	maxBig int
}

// requeueInterrupted queues again the running jobs nobody works on any
// more: all of them when the process is alone (it has not started a
// worker yet), the ones whose replica is dead on a shared database. A
// job taken over gets a new generation, so that its old worker, should
// it only have been slow rather than dead, stops at its next write (see
// current) instead of finishing the job a second time; attempts stay, so
// that a document that kills replica after replica is still quarantined.
func requeueInterrupted(ctx context.Context, gdb *gorm.DB, r *cluster.Replica) (int64, error) {
	res := gdb.WithContext(ctx).Exec(`UPDATE indexing_jobs SET state = 'queued', generation = generation + 1, replica_id = NULL, updated_at = ?
		WHERE state = 'running' AND ?`, time.Now().UTC(), r.Interrupted("replica_id"))
	if res.RowsAffected > 0 {
		notify()
	}
	return res.RowsAffected, res.Error
}

// takeOver queues again, every interval, the jobs of replicas that died.
func (w *worker) takeOver(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = cluster.DefaultHeartbeat
	}
	cluster.Every(ctx, interval, func(ctx context.Context) {
		n, err := requeueInterrupted(ctx, w.svc.db, w.replica)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Error("indexing: taking over jobs of dead replicas", "err", err)
		case n > 0:
			w.log.Warn("indexing: took over jobs of dead replicas", "jobs", n)
		}
	})
}

func (w *worker) loop(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			ran, err := w.runOne(ctx)
			if err != nil && ctx.Err() == nil {
				w.log.Error("indexing: job failed", "err", err)
			}
			if !ran {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// job is a claimed queue entry.
type job struct {
	DocumentID string
	Generation int
	Attempts   int
	big        bool
}

// errStale stops a worker whose document was queued again meanwhile or
// deleted.
var errStale = errors.New("indexing job superseded")

// runOne claims one queued job and indexes its document; it reports
// whether there was a job.
func (w *worker) runOne(ctx context.Context) (bool, error) {
	j, ok, err := w.claimOne(ctx)
	if err != nil || !ok {
		return false, err
	}
	defer func() {
		if j.big {
			w.claim.Lock()
			w.big--
			w.claim.Unlock()
		}
	}()
	jctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	err = w.safeIndex(jctx, j)
	if err == nil {
		metrics.DocumentIndexed(true)
	}
	switch {
	case err == nil, errors.Is(err, errStale):
		return true, nil
	case ctx.Err() != nil:
		// Stopped: the job goes back to the queue without using up an
		// attempt (a fresh context, since ctx is done).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		return true, w.svc.db.WithContext(rctx).Exec(`UPDATE indexing_jobs SET state = 'queued', replica_id = NULL,
			attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
			WHERE document_id = ? AND generation = ? AND state = 'running'`, j.DocumentID, j.Generation).Error
	case jctx.Err() != nil:
		err = fmt.Errorf("indexing took longer than %s; giving up", w.timeout)
	}
	w.log.Warn("indexing: document failed", "document", j.DocumentID, "err", err)
	metrics.DocumentIndexed(false)
	return true, w.fail(j, err)
}

// claimOne takes the oldest queued job, or the oldest small one while big
// documents hold all the workers they may. One statement moves the job to
// running under this replica: on PostgreSQL the row is locked with SKIP
// LOCKED, so that workers of other replicas claiming at the same moment
// take other jobs instead of the same one or waiting; SQLite has one
// writer, which is enough.
func (w *worker) claimOne(ctx context.Context) (job, bool, error) {
	w.claim.Lock()
	defer w.claim.Unlock()
	sizeCap := int64(-1)
	if w.big >= w.maxBig {
		sizeCap = BigDocument - 1
	}
	lock := ""
	if db.IsPostgres(w.svc.db) {
		lock = " FOR UPDATE OF j SKIP LOCKED"
	}
	var jobs []job
	err := w.svc.db.WithContext(ctx).Raw(`UPDATE indexing_jobs SET state = 'running', attempts = attempts + 1, replica_id = ?, updated_at = ?
		WHERE state = 'queued' AND document_id = (SELECT j.document_id FROM indexing_jobs j LEFT JOIN documents d ON d.id = j.document_id
			WHERE j.state = 'queued' AND (? < 0 OR COALESCE(d.file_size, 0) <= ?)
			ORDER BY j.created_at, j.document_id LIMIT 1`+lock+`)
		RETURNING document_id, generation, attempts`, w.replica.OwnerID(), time.Now().UTC(), sizeCap, sizeCap).Scan(&jobs).Error
	if err != nil || len(jobs) == 0 {
		return job{}, false, err
	}
	j := jobs[0]
	var size int64
	if err := w.svc.db.WithContext(ctx).Raw(`SELECT COALESCE(file_size, 0) FROM documents WHERE id = ?`, j.DocumentID).Scan(&size).Error; err != nil {
		return j, true, nil // counted as small; the job itself will report the error
	}
	if size >= BigDocument {
		j.big = true
		w.big++
	}
	return j, true, nil
}

// safeIndex runs index, turning a panic into an error so that one bad
// document cannot end the process.
func (w *worker) safeIndex(ctx context.Context, j job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			w.log.Error("indexing: panic", "document", j.DocumentID, "panic", v, "stack", string(debug.Stack()))
			err = errors.New("indexing failed unexpectedly on this document")
		}
	}()
	return w.index(ctx, j)
}

// fail records why a document could not be indexed and drops its job.
func (w *worker) fail(j job, cause error) error {
	msg := cause.Error()
	var ae *apperr.Error
	if errors.As(cause, &ae) {
		msg = ae.Message
	}
	now := time.Now().UTC()
	return w.svc.db.Transaction(func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE documents SET indexing_status = 'error', error = ?, stopped_at = ?, updated_at = ?
			WHERE id = ? AND EXISTS (SELECT 1 FROM indexing_jobs WHERE document_id = ? AND generation = ?)`,
			msg, now, now, j.DocumentID, j.DocumentID, j.Generation)
		if res.Error != nil {
			return res.Error
		}
		return tx.Exec(`DELETE FROM indexing_jobs WHERE document_id = ? AND generation = ?`, j.DocumentID, j.Generation).Error
	})
}

// current runs fn in a transaction if the job is still the document's
// latest; otherwise it returns errStale. On PostgreSQL the document's row
// is locked first: whoever queues the document again (an update, or a
// replica taking the job over) and the worker that takes it next wait for
// this write to commit, so that no write of an outdated worker lands after
// the new one has started. SQLite's single writer gives the same order.
func (w *worker) current(ctx context.Context, j job, fn func(tx *gorm.DB) error) error {
	return w.svc.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if db.IsPostgres(tx) {
			var ids []string
			if err := tx.Raw(`SELECT id FROM documents WHERE id = ? FOR NO KEY UPDATE`, j.DocumentID).Scan(&ids).Error; err != nil {
				return err
			}
			if len(ids) == 0 {
				return errStale
			}
		}
		var n int64
		if err := tx.Raw(`SELECT COUNT(*) FROM indexing_jobs WHERE document_id = ? AND generation = ?`, j.DocumentID, j.Generation).Scan(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return errStale
		}
		return fn(tx)
	})
}

// phase moves the document to status and sets the given columns.
func (w *worker) phase(ctx context.Context, j job, status string, cols map[string]any) error {
	return w.current(ctx, j, func(tx *gorm.DB) error {
		if cols == nil {
			cols = map[string]any{}
		}
		cols["indexing_status"] = status
		cols["updated_at"] = time.Now().UTC()
		return tx.Model(&models.Document{}).Where("id = ?", j.DocumentID).Updates(cols).Error
	})
}

// index takes one document through every stage.
func (w *worker) index(ctx context.Context, j job) error {
	var doc models.Document
	if err := w.svc.db.WithContext(ctx).Take(&doc, "id = ?", j.DocumentID).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return errStale
		}
		return err
	}
	var ds models.Dataset
	if err := w.svc.db.WithContext(ctx).Take(&ds, "id = ?", doc.DatasetID).Error; err != nil {
		return err
	}
	if j.Attempts > MaxAttempts {
		return fmt.Errorf("indexing was interrupted %d times (the server stopped while working on this document); giving up", j.Attempts-1)
	}
	now := func() time.Time { return time.Now().UTC() }

	if err := w.phase(ctx, j, StatusParsing, map[string]any{"processing_started_at": now(), "error": nil}); err != nil {
		return err
	}
	f, err := w.svc.openFile(ctx, &doc)
	if err != nil {
		return fmt.Errorf("the stored file is missing: %w", err)
	}
	parsed, err := docparse.Parse(doc.FileName, f, doc.FileSize)
	f.Close()
	if err != nil {
		return err
	}
	if err := w.phase(ctx, j, StatusCleaning, map[string]any{"parsing_completed_at": now(), "content": parsed.Text}); err != nil {
		return err
	}
	cfg, err := ruleOf(&doc)
	if err != nil {
		return err
	}
	cleaned := cfg.Clean(parsed.Text)
	if err := w.phase(ctx, j, StatusSplitting, map[string]any{"cleaning_completed_at": now()}); err != nil {
		return err
	}
	chunks := cfg.Split(cleaned)
	if err := w.phase(ctx, j, StatusIndexing, map[string]any{
		"splitting_completed_at": now(), "total_segments": len(chunks), "completed_segments": 0,
	}); err != nil {
		return err
	}

	embed, modelKey, err := w.svc.embedder(&ds)
	if err != nil {
		return err
	}
	// Drop the chunks of an earlier indexing; cascades take child chunks,
	// vectors and (through triggers) full-text entries along.
	if err := w.current(ctx, j, func(tx *gorm.DB) error {
		return tx.Where("document_id = ?", doc.ID).Delete(&models.Segment{}).Error
	}); err != nil {
		return err
	}
	words, tokens := 0, 0
	for start := 0; start < len(chunks); start += batchSize {
		part := chunks[start:min(start+batchSize, len(chunks))]
		b, err := buildChunks(ctx, &doc, part, embed, modelKey)
		if err != nil {
			return err
		}
		done := start + len(part)
		if err := w.current(ctx, j, func(tx *gorm.DB) error {
			if err := b.write(tx); err != nil {
				return err
			}
			return tx.Model(&models.Document{}).Where("id = ?", doc.ID).
				Updates(map[string]any{"completed_segments": done, "updated_at": now()}).Error
		}); err != nil {
			return err
		}
		words += b.words
		tokens += b.tokens
		metrics.ChunksIndexed(len(part))
	}
	return w.current(ctx, j, func(tx *gorm.DB) error {
		if err := tx.Model(&models.Document{}).Where("id = ?", doc.ID).Updates(map[string]any{
			"indexing_status": StatusCompleted, "completed_at": now(), "updated_at": now(),
			"word_count": words, "tokens": tokens,
		}).Error; err != nil {
			return err
		}
		return tx.Exec(`DELETE FROM indexing_jobs WHERE document_id = ? AND generation = ?`, j.DocumentID, j.Generation).Error
	})
}

// built are rows ready to be written for some chunks.
type built struct {
	segments []models.Segment
	children []models.ChildChunk
	vectors  []models.SegmentEmbedding
	words    int
	tokens   int
}

// writeAndCount stores the rows of a document's changed chunks and then
// refreshes the document's counts.
func (b *built) writeAndCount(tx *gorm.DB, documentID string) error {
	if err := b.write(tx); err != nil {
		return err
	}
	return refreshDocumentCounts(tx, documentID)
}

func (b *built) write(tx *gorm.DB) error {
	if len(b.segments) > 0 {
		if err := tx.Create(&b.segments).Error; err != nil {
			return err
		}
	}
	if len(b.children) > 0 {
		if err := tx.CreateInBatches(&b.children, 200).Error; err != nil {
			return err
		}
	}
	if len(b.vectors) > 0 {
		if err := tx.CreateInBatches(&b.vectors, 200).Error; err != nil {
			return err
		}
	}
	return nil
}

// buildChunks makes the rows of some chunks of doc: keywords for every
// chunk and, with an embedder, vectors (of the chunk, or of its children in
// parent-child documents, or of the question in Q&A documents).
func buildChunks(ctx context.Context, doc *models.Document, chunks []textsplit.Chunk, embed llm.Embedder, modelKey string) (*built, error) {
	b := &built{}
	now := time.Now().UTC()
	type pending struct {
		text              string
		segmentID         string
		childID           *string
		nodeID, datasetID string
	}
	var toEmbed []pending
	for _, c := range chunks {
		seg := models.Segment{
			ID: uuid.NewString(), DatasetID: doc.DatasetID, DocumentID: doc.ID, Position: c.Position,
			Content: c.Content, Tokens: c.Tokens, Enabled: true, Status: StatusCompleted,
			CreatedBy: doc.CreatedBy, CreatedAt: now, UpdatedAt: now, IndexingAt: &now, CompletedAt: &now,
		}
		if doc.DocForm == FormQA {
			seg.Content, seg.Answer = question(c.Content), c.Content
			seg.Tokens = llm.CountTokens(seg.Content) + c.Tokens
		}
		seg.IndexNodeID = uuid.NewString()
		seg.IndexNodeHash = hashText(seg.Content)
		seg.WordCount = wordCount(seg.Content) + wordCount(seg.Answer)
		seg.Keywords = keywordsJSON(textsplit.Keywords(seg.Content+"\n"+seg.Answer, 10))
		b.words += seg.WordCount
		b.tokens += seg.Tokens
		if doc.DocForm != FormHierarchical {
			toEmbed = append(toEmbed, pending{text: seg.Content, segmentID: seg.ID, nodeID: seg.IndexNodeID})
		}
		for _, ch := range c.Children {
			child := models.ChildChunk{
				ID: uuid.NewString(), SegmentID: seg.ID, DocumentID: doc.ID, DatasetID: doc.DatasetID,
				Position: ch.Position, Content: ch.Content, WordCount: wordCount(ch.Content),
				IndexNodeID: uuid.NewString(), IndexNodeHash: hashText(ch.Content), Type: ChildAutomatic,
				CreatedAt: now, UpdatedAt: now,
			}
			b.children = append(b.children, child)
			id := child.ID
			toEmbed = append(toEmbed, pending{text: ch.Content, segmentID: seg.ID, childID: &id, nodeID: child.IndexNodeID})
		}
		b.segments = append(b.segments, seg)
	}
	if embed == nil || len(toEmbed) == 0 {
		return b, nil
	}
	texts := make([]string, len(toEmbed))
	for i, p := range toEmbed {
		texts[i] = p.text
	}
	vecs, _, err := embed.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("the embedding model returned %d vectors for %d texts", len(vecs), len(texts))
	}
	for i, p := range toEmbed {
		b.vectors = append(b.vectors, models.SegmentEmbedding{
			NodeID: p.nodeID, Model: modelKey, DatasetID: doc.DatasetID, SegmentID: p.segmentID,
			ChildID: p.childID, Dims: len(vecs[i]), Vector: EncodeVector(vecs[i]),
		})
	}
	return b, nil
}

// question is the question the builtin Q&A generation makes of a chunk: its
// first sentence, ending in a question mark.
func question(text string) string {
	text = strings.TrimSpace(text)
	end := len(text)
	for i, r := range text {
		if r == '.' || r == '!' || r == '?' || r == '\n' || r == '。' || r == '？' || r == '！' {
			end = i
			break
		}
	}
	q := strings.TrimRightFunc(text[:end], func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
	if q == "" {
		q = text
	}
	return q + "?"
}
