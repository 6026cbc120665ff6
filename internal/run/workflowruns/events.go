package workflowruns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/workflow"
)

// EventsTopic is the bus topic on which a replica announces that it wrote
// events of a run; the payload is EventNote's text.
const EventsTopic = "run_events"

// Publisher sends a short message to every replica (cluster.Bus does).
type Publisher interface {
	Publish(ctx context.Context, topic string, payload []byte) error
}

// TxPublisher is a Publisher that can also send a message as part of a
// write transaction, delivered only once it commits (cluster.PostgresBus
// does, with NOTIFY). The log then announces a batch in the transaction
// that stores it: one round trip and one commit fewer per batch.
type TxPublisher interface {
	Publisher
	PublishTx(tx *gorm.DB, topic string, payload []byte) error
}

// EventLog writes the events of running workflow runs to the run_events
// table and reads them back, so that a replica can follow a run another
// replica executes. A run's events are kept in segments, one per stretch
// of execution (its start, then each resumption); a segment has a single
// writer, so its rows are in order. Used on PostgreSQL only: one SQLite
// process follows its runs from memory.
type EventLog struct {
	db      *gorm.DB
	commits *groupcommit.Queue // nil: each batch commits on its own
	pub     Publisher
	// wrote, when set, is told in this process after every batch written.
	wrote func(runID string)
	log   *slog.Logger
}

// NewEventLog returns the event log over gdb. After each batch of rows it
// publishes an EventNote on pub (when not nil) and calls wrote (when not
// nil) with the run's id.
func NewEventLog(gdb *gorm.DB, pub Publisher, wrote func(runID string), log *slog.Logger) *EventLog {
	if log == nil {
		log = slog.Default()
	}
	return &EventLog{db: gdb, pub: pub, wrote: wrote, log: log}
}

// ShareCommits makes the log write its rows through q, in the batches of
// every other writer that uses it (the runs' own rows, chat answers), so
// that the events of concurrent runs share commits instead of making one
// each. Call it before the log writes anything.
func (l *EventLog) ShareCommits(q *groupcommit.Queue) { l.commits = q }

// transact runs fn in a write transaction: the shared queue's when there
// is one, else one of its own.
func (l *EventLog) transact(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if l.commits != nil {
		return l.commits.Write(ctx, fn)
	}
	return l.db.WithContext(ctx).Transaction(fn)
}

// runEvent is a row of run_events. Seq 0 opens a segment; a null event
// with seq > 0 closes it.
type runEvent struct {
	RunID     string `gorm:"column:run_id"`
	Segment   int64
	Seq       int64
	Event     *string
	CreatedAt time.Time
}

func (runEvent) TableName() string { return "run_events" }

// EventNote is the message announcing new rows of a run, up to seq of
// segment.
type EventNote struct {
	RunID        string
	Segment, Seq int64
}

func (n EventNote) String() string { return fmt.Sprintf("%s %d %d", n.RunID, n.Segment, n.Seq) }

// ParseEventNote reads an EventNote from its text.
func ParseEventNote(s string) (EventNote, bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return EventNote{}, false
	}
	seg, err1 := strconv.ParseInt(f[1], 10, 64)
	seq, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return EventNote{}, false
	}
	return EventNote{RunID: f[0], Segment: seg, Seq: seq}, true
}

// SegmentWriter writes the events of one segment in the background, in
// batches, in the order Add received them.
type SegmentWriter struct {
	l       *EventLog
	runID   string
	segment int64 // 0 when the segment could not be opened: nothing is written

	mu      sync.Mutex
	pending []runEvent
	next    int64
	ended   bool
	wake    chan struct{}
	done    chan struct{}

	// onceMu guards once: long texts the segment's node events already
	// hold whole (see shared.go), kept as previews in later node events.
	onceMu sync.Mutex
	once   onceStore
}

// writeTimeout bounds each write of the log.
const writeTimeout = 10 * time.Second

func (l *EventLog) newWriter(runID string) *SegmentWriter {
	return &SegmentWriter{l: l, runID: runID, next: 1, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// BeginRun opens the first segment of a new run runID. Its number is 1
// without asking, and its opening row goes with the first batch of
// events, so starting a run waits for no write here. A follower who looks
// before that batch is written finds the run without a segment yet, as
// the stored run says it runs, and looks again.
func (l *EventLog) BeginRun(runID string) *SegmentWriter {
	w := l.newWriter(runID)
	w.segment = 1
	w.pending = []runEvent{{RunID: runID, Segment: 1, Seq: 0, CreatedAt: time.Now().UTC()}}
	go w.loop()
	return w
}

// Begin opens the next segment of run runID, which resumes: its number is
// taken now, so segments are ordered as they began, whichever replica runs
// them.
func (l *EventLog) Begin(runID string) *SegmentWriter {
	w := l.newWriter(runID)
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var err error
	for range 3 {
		// Two replicas never open segments of one run at once (a run is
		// claimed before it resumes); retry anyway should it happen.
		now := time.Now().UTC()
		err = l.transact(ctx, func(tx *gorm.DB) error {
			return tx.Raw(`INSERT INTO run_events (run_id, segment, seq, event, created_at)
				SELECT ?, COALESCE(MAX(segment), 0) + 1, 0, NULL, ? FROM run_events WHERE run_id = ?
				RETURNING segment`, runID, now, runID).Scan(&w.segment).Error
		})
		if err == nil {
			break
		}
	}
	if err != nil {
		l.log.Error("workflow: opening a segment of run events failed; other replicas will not see it live", "run", runID, "err", err)
		close(w.done)
		return w
	}
	go w.loop()
	return w
}

// Segment is the number of the segment (0 when it could not be opened).
func (w *SegmentWriter) Segment() int64 { return w.segment }

// Add queues ev for writing.
func (w *SegmentWriter) Add(ev workflow.Event) {
	if w.segment == 0 {
		return
	}
	text, err := json.Marshal(w.shortened(ev))
	if err != nil {
		w.l.log.Error("workflow: encoding a run event failed", "run", w.runID, "event", ev.Name(), "err", err)
		return
	}
	s := string(text)
	w.push(&s, false)
}

// shortened is ev as the log keeps it: node events with a long text an
// earlier node event of the segment holds whole carry its preview instead
// (a copy: ev itself also goes to the run's live stream). The run's end,
// its answer text and everything else are kept as they are.
func (w *SegmentWriter) shortened(ev workflow.Event) workflow.Event {
	w.onceMu.Lock()
	defer w.onceMu.Unlock()
	node := func(d *workflow.NodeFinishedData) {
		d.Inputs = w.once.shortenMap(d.Inputs, fmt.Sprintf("inputs of node %q (%s)", d.Title, d.NodeID))
		d.ProcessData = w.once.shortenMap(d.ProcessData, fmt.Sprintf("process data of node %q (%s)", d.Title, d.NodeID))
		d.Outputs = w.once.shortenMap(d.Outputs, fmt.Sprintf("outputs of node %q (%s)", d.Title, d.NodeID))
	}
	switch e := ev.(type) {
	case *workflow.NodeStarted:
		cp := *e
		cp.Data.Inputs = w.once.shortenMap(e.Data.Inputs, fmt.Sprintf("inputs of node %q (%s)", e.Data.Title, e.Data.NodeID))
		return &cp
	case *workflow.NodeFinished:
		cp := *e
		node(&cp.Data)
		return &cp
	case *workflow.NodeRetry:
		cp := *e
		node(&cp.Data.NodeFinishedData)
		return &cp
	}
	return ev
}

// End writes the segment's end and waits until every event is written
// (or writing gave up).
func (w *SegmentWriter) End() {
	if w.segment == 0 {
		return
	}
	w.push(nil, true)
	<-w.done
}

func (w *SegmentWriter) push(event *string, end bool) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, runEvent{RunID: w.runID, Segment: w.segment, Seq: w.next, Event: event, CreatedAt: time.Now().UTC()})
	w.next++
	w.ended = end
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop writes what was queued, a batch at a time, until the end is
// written.
func (w *SegmentWriter) loop() {
	defer close(w.done)
	defer func() {
		if p := recover(); p != nil {
			w.l.log.Error("workflow: the run event writer panicked", "run", w.runID, "panic", p)
		}
	}()
	for range w.wake {
		w.mu.Lock()
		batch, ended := w.pending, w.ended
		w.pending = nil
		w.mu.Unlock()
		if len(batch) > 0 {
			w.write(batch)
		}
		if ended {
			return
		}
	}
}

// write stores one batch, trying a few times, then announces it: in the
// same transaction when the publisher can (TxPublisher), else after it.
func (w *SegmentWriter) write(batch []runEvent) {
	last := batch[len(batch)-1]
	note := []byte(EventNote{RunID: w.runID, Segment: w.segment, Seq: last.Seq}.String())
	txPub, _ := w.l.pub.(TxPublisher)
	var err error
	announced := false
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err = w.l.transact(ctx, func(tx *gorm.DB) error {
			announced = false // a batch that failed runs again
			if err := tx.CreateInBatches(batch, 200).Error; err != nil {
				return err
			}
			if txPub != nil {
				if err := txPub.PublishTx(tx, EventsTopic, note); err != nil {
					return err
				}
				announced = true
			}
			return nil
		})
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			// Written by an attempt whose answer was lost; the note
			// went with it, or goes now.
			err, announced = nil, false
			break
		}
	}
	if err != nil {
		w.l.log.Error("workflow: writing run events failed; followers on other replicas miss them", "run", w.runID, "events", len(batch), "err", err)
		return
	}
	if w.l.wrote != nil {
		w.l.wrote(w.runID)
	}
	if w.l.pub != nil && !announced {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		if err := w.l.pub.Publish(ctx, EventsTopic, note); err != nil {
			w.l.log.Warn("workflow: announcing run events failed; followers find them by polling", "run", w.runID, "err", err)
		}
		cancel()
	}
}

// SegmentInfo describes the latest segment of a run.
type SegmentInfo struct {
	Segment int64
	// Ended is set once the segment's end was written, at EndedAt.
	Ended   bool
	EndedAt time.Time
}

// Latest returns the latest segment of run runID; ok is false when the
// run has none.
func (l *EventLog) Latest(ctx context.Context, runID string) (info SegmentInfo, ok bool, err error) {
	var segs []int64
	if err := l.db.WithContext(ctx).Model(&runEvent{}).Where("run_id = ?", runID).
		Order("segment DESC").Limit(1).Pluck("segment", &segs).Error; err != nil {
		return info, false, err
	}
	if len(segs) == 0 {
		return info, false, nil
	}
	info.Segment = segs[0]
	var ends []runEvent
	if err := l.db.WithContext(ctx).Where("run_id = ? AND segment = ? AND seq > 0 AND event IS NULL", runID, info.Segment).
		Limit(1).Find(&ends).Error; err != nil {
		return info, false, err
	}
	if len(ends) > 0 {
		info.Ended, info.EndedAt = true, ends[0].CreatedAt
	}
	return info, true, nil
}

// StoredEvent is one row of a segment read back: an event, or the
// segment's end (End set, Event nil).
type StoredEvent struct {
	Seq   int64
	Event json.RawMessage
	End   bool
}

// readBatch bounds how many rows After returns at once.
const readBatch = 500

// After returns the rows of segment of run runID after seq, in order, at
// most a few hundred at a time.
func (l *EventLog) After(ctx context.Context, runID string, segment, seq int64) ([]StoredEvent, error) {
	var rows []runEvent
	if err := l.db.WithContext(ctx).Where("run_id = ? AND segment = ? AND seq > ?", runID, segment, seq).
		Order("seq").Limit(readBatch).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]StoredEvent, len(rows))
	for i, r := range rows {
		out[i] = StoredEvent{Seq: r.Seq, End: r.Event == nil}
		if r.Event != nil {
			out[i].Event = json.RawMessage(*r.Event)
		}
	}
	return out, nil
}

// Prune deletes the events of runs that ended before cutoff, and of runs
// that no longer exist, written before cutoff. Paused runs keep theirs.
func (l *EventLog) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	cutoff = cutoff.UTC()
	res := l.db.WithContext(ctx).Exec(`DELETE FROM run_events WHERE created_at < ? AND (
		run_id IN (SELECT id FROM workflow_runs WHERE status NOT IN (?, ?) AND finished_at < ?)
		OR NOT EXISTS (SELECT 1 FROM workflow_runs r WHERE r.id = run_events.run_id))`,
		cutoff, StatusRunning, StatusPaused, cutoff)
	return res.RowsAffected, res.Error
}
