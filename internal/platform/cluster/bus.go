package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"appkb/db"
)

// Bus carries short messages between the replicas of one installation.
// Every subscriber of a topic receives each message published on it,
// in every replica, the publisher's included. Delivery is best effort (see
// the package doc).
type Bus interface {
	// Publish sends payload to the subscribers of topic. It fails when the
	// message is too large (MaxMessage) or not text, or when the database
	// refuses it.
	Publish(ctx context.Context, topic string, payload []byte) error
	// Subscribe returns a channel that receives the payloads published on
	// topic from now on, and a function that ends the subscription and
	// closes the channel.
	Subscribe(topic string) (<-chan []byte, func())
	// Start begins receiving messages from other replicas; it returns once
	// it listens, or after StartWait while it keeps trying in the
	// background.
	Start(ctx context.Context)
	// Stop ends receiving and waits for it to return.
	Stop()
}

// MaxMessage bounds the size of a topic and its payload together, in
// bytes. PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; the
// same bound holds in-process, so a message works on both engines or on
// neither.
const MaxMessage = 7900

// SubscriberBuffer is how many messages a subscriber may fall behind by
// before further ones are dropped for it.
const SubscriberBuffer = 256

// StartWait bounds how long Start waits for the first LISTEN.
var StartWait = 5 * time.Second

// Errors of Publish.
var (
	ErrTooLarge = errors.New("cluster: message too large")
	ErrBadTopic = errors.New("cluster: a topic is a non-empty string without spaces or newlines")
	ErrNotText  = errors.New("cluster: a payload must be UTF-8 text without NUL bytes")
)

// check tells whether topic and payload can travel on either engine.
func check(topic string, payload []byte) error {
	if topic == "" || strings.ContainsAny(topic, " \n\r\t\x00") || !utf8.ValidString(topic) {
		return ErrBadTopic
	}
	if len(topic)+1+len(payload) > MaxMessage {
		return fmt.Errorf("%w: %d bytes on topic %s (at most %d)", ErrTooLarge, len(topic)+1+len(payload), topic, MaxMessage)
	}
	if !utf8.Valid(payload) || bytes.IndexByte(payload, 0) >= 0 {
		return ErrNotText
	}
	return nil
}

// NewBus returns the bus that fits gdb: LISTEN/NOTIFY on PostgreSQL, an
// in-process bus otherwise.
func NewBus(gdb *gorm.DB, log *slog.Logger) Bus {
	if log == nil {
		log = slog.Default()
	}
	if !db.IsPostgres(gdb) {
		return NewLocalBus(log)
	}
	dsn := ""
	if d, ok := gdb.Dialector.(*postgres.Dialector); ok && d.Config != nil {
		dsn = d.DSN
	}
	if dsn == "" {
		log.Error("cluster: the PostgreSQL connection string is unknown; messages stay in this process")
		return NewLocalBus(log)
	}
	return newPostgresBus(gdb, dsn, log)
}

// fanout hands messages to the subscribers of this process.
type fanout struct {
	log  *slog.Logger
	mu   sync.Mutex
	subs map[string]map[chan []byte]struct{}
}

func (f *fanout) Subscribe(topic string) (<-chan []byte, func()) {
	ch := make(chan []byte, SubscriberBuffer)
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[string]map[chan []byte]struct{}{}
	}
	if f.subs[topic] == nil {
		f.subs[topic] = map[chan []byte]struct{}{}
	}
	f.subs[topic][ch] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs[topic], ch)
			if len(f.subs[topic]) == 0 {
				delete(f.subs, topic)
			}
			close(ch)
			f.mu.Unlock()
		})
	}
}

// deliver gives payload to every subscriber of topic that has room; the
// others lose it.
func (f *fanout) deliver(topic string, payload []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs[topic] {
		select {
		case ch <- bytes.Clone(payload):
		default:
			f.log.Warn("cluster: a subscriber fell behind; a message was dropped", "topic", topic)
		}
	}
}

// LocalBus is the bus of a single process: Publish delivers at once.
type LocalBus struct{ fanout }

// NewLocalBus returns an in-process bus.
func NewLocalBus(log *slog.Logger) *LocalBus {
	if log == nil {
		log = slog.Default()
	}
	return &LocalBus{fanout{log: log}}
}

// Publish implements Bus.
func (b *LocalBus) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := check(topic, payload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.deliver(topic, payload)
	return nil
}

// Start implements Bus; there is nothing to start.
func (b *LocalBus) Start(context.Context) {}

// Stop implements Bus; there is nothing to stop.
func (b *LocalBus) Stop() {}

// notifyChannel is the one PostgreSQL channel every replica LISTENs on;
// the topic travels in the payload, before a newline.
const notifyChannel = "appkb_bus"

// Reconnection delays of the listening connection.
var (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// PostgresBus publishes with pg_notify through the pool and receives on a
// connection of its own that LISTENs, re-established with growing delays
// when it is lost.
type PostgresBus struct {
	fanout
	gdb *gorm.DB
	dsn string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{} // closed at the first successful LISTEN
	// pid is the server process of the listening connection, 0 while
	// there is none (tests cut it to check the reconnection).
	pid atomic.Uint32
}

func newPostgresBus(gdb *gorm.DB, dsn string, log *slog.Logger) *PostgresBus {
	return &PostgresBus{fanout: fanout{log: log}, gdb: gdb, dsn: dsn, ready: make(chan struct{})}
}

// Publish implements Bus.
func (b *PostgresBus) Publish(ctx context.Context, topic string, payload []byte) error {
	return b.PublishTx(b.gdb.WithContext(ctx), topic, payload)
}

// PublishTx is Publish as part of tx: PostgreSQL delivers the message
// when tx commits, and never when it rolls back, so subscribers hear of
// rows only once they can read them.
func (b *PostgresBus) PublishTx(tx *gorm.DB, topic string, payload []byte) error {
	if err := check(topic, payload); err != nil {
		return err
	}
	if err := tx.Exec("SELECT pg_notify(?, ?)", notifyChannel, topic+"\n"+string(payload)).Error; err != nil {
		return fmt.Errorf("cluster: notify %s: %w", topic, err)
	}
	return nil
}

// Start implements Bus.
func (b *PostgresBus) Start(ctx context.Context) {
	b.mu.Lock()
	if b.cancel != nil {
		b.mu.Unlock()
		return
	}
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	b.mu.Unlock()
	go b.listen(ctx)
	select {
	case <-b.ready:
	case <-time.After(StartWait):
		b.log.Warn("cluster: not listening for other replicas yet; still trying")
	case <-ctx.Done():
	}
}

// Stop implements Bus.
func (b *PostgresBus) Stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// listen keeps a listening connection until ctx ends.
func (b *PostgresBus) listen(ctx context.Context) {
	defer close(b.done)
	delay := minBackoff
	for {
		listened, err := b.session(ctx)
		b.pid.Store(0)
		if ctx.Err() != nil {
			return
		}
		if listened {
			delay = minBackoff
		}
		b.log.Warn("cluster: the listening connection failed; reconnecting", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, maxBackoff)
	}
}

// session connects, LISTENs and delivers notifications until the
// connection fails or ctx ends. listened tells whether LISTEN succeeded.
func (b *PostgresBus) session(ctx context.Context) (listened bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("listener panicked: %v", p)
		}
	}()
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	b.pid.Store(conn.PgConn().PID())
	select {
	case <-b.ready:
	default:
		close(b.ready)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		topic, payload, ok := strings.Cut(n.Payload, "\n")
		if !ok {
			continue // not one of ours
		}
		b.deliver(topic, []byte(payload))
	}
}
