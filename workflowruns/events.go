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

	"appkb/workflow"
)

// EventsTopic is the bus topic on which a replica announces that it wrote
// events of a run; the payload is EventNote's text.
const EventsTopic = "run_events"

// Publisher sends a short message to every replica (cluster.Bus does).
type Publisher interface {
	Publish(ctx context.Context, topic string, payload []byte) error
}

// EventLog writes the events of running workflow runs to the run_events
// table and reads them back, so that a replica can follow a run another
// replica executes. A run's events are kept in segments, one per stretch
// of execution (its start, then each resumption); a segment has a single
// writer, so its rows are in order. Used on PostgreSQL only: one SQLite
// process follows its runs from memory.
type EventLog struct {
	db  *gorm.DB
	pub Publisher
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
}

// writeTimeout bounds each write of the log.
const writeTimeout = 10 * time.Second

// Begin opens the next segment of run runID: its number is taken now, so
// segments are ordered as they began, whichever replica runs them.
func (l *EventLog) Begin(runID string) *SegmentWriter {
	w := &SegmentWriter{l: l, runID: runID, next: 1, wake: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var err error
	for range 3 {
		// Two replicas never open segments of one run at once (a run is
		// claimed before it resumes); retry anyway should it happen.
		err = l.db.WithContext(ctx).Raw(`INSERT INTO run_events (run_id, segment, seq, event, created_at)
			SELECT ?, COALESCE(MAX(segment), 0) + 1, 0, NULL, ? FROM run_events WHERE run_id = ?
			RETURNING segment`, runID, time.Now().UTC(), runID).Scan(&w.segment).Error
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
	text, err := json.Marshal(ev)
	if err != nil {
		w.l.log.Error("workflow: encoding a run event failed", "run", w.runID, "event", ev.Name(), "err", err)
		return
	}
	s := string(text)
	w.push(&s, false)
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

// write stores one batch, trying a few times, then announces it.
func (w *SegmentWriter) write(batch []runEvent) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err = w.l.db.WithContext(ctx).CreateInBatches(batch, 200).Error
		cancel()
		if err == nil || errors.Is(err, gorm.ErrDuplicatedKey) {
			err = nil
			break
		}
	}
	if err != nil {
		w.l.log.Error("workflow: writing run events failed; followers on other replicas miss them", "run", w.runID, "events", len(batch), "err", err)
		return
	}
	last := batch[len(batch)-1]
	if w.l.wrote != nil {
		w.l.wrote(w.runID)
	}
	if w.l.pub != nil {
		note := EventNote{RunID: w.runID, Segment: w.segment, Seq: last.Seq}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		if err := w.l.pub.Publish(ctx, EventsTopic, []byte(note.String())); err != nil {
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
