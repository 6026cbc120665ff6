package codeworker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// The parent and a worker exchange frames: a 4-byte big-endian length, then
// that many bytes. The bytes are a compact encoding of the plain values
// workflow variables are made of (nil, bool, float64, string, []any,
// map[string]any), which keeps numbers exact (NaN and infinities included)
// and needs no reflection.

// MaxDepth is how deeply values may nest on the wire.
const MaxDepth = 10000

// errDepth reports a value nested deeper than MaxDepth.
var errDepth = fmt.Errorf("values are nested deeper than %d levels", MaxDepth)

const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagFloat
	tagString
	tagList
	tagMap
)

type encoder struct{ buf []byte }

func (e *encoder) uvarint(n uint64) { e.buf = binary.AppendUvarint(e.buf, n) }

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) value(v any, depth int) error {
	if depth > MaxDepth {
		return errDepth
	}
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, tagNil)
	case bool:
		if x {
			e.buf = append(e.buf, tagTrue)
		} else {
			e.buf = append(e.buf, tagFalse)
		}
	case float64:
		e.buf = append(e.buf, tagFloat)
		e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(x))
	case string:
		e.buf = append(e.buf, tagString)
		e.str(x)
	case []any:
		e.buf = append(e.buf, tagList)
		e.uvarint(uint64(len(x)))
		for _, el := range x {
			if err := e.value(el, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		e.buf = append(e.buf, tagMap)
		e.uvarint(uint64(len(x)))
		for k, el := range x {
			e.str(k)
			if err := e.value(el, depth+1); err != nil {
				return err
			}
		}
	default: // not a plain value: callers convert first; never silently lost
		e.buf = append(e.buf, tagString)
		e.str(fmt.Sprint(x))
	}
	return nil
}

var errShort = errors.New("truncated frame")

type decoder struct{ buf []byte }

func (d *decoder) uvarint() (uint64, error) {
	n, k := binary.Uvarint(d.buf)
	if k <= 0 {
		return 0, errShort
	}
	d.buf = d.buf[k:]
	return n, nil
}

func (d *decoder) str() (string, error) {
	n, err := d.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(d.buf)) {
		return "", errShort
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s, nil
}

func (d *decoder) byte1() (byte, error) {
	if len(d.buf) == 0 {
		return 0, errShort
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b, nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, errDepth
	}
	tag, err := d.byte1()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNil:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagFloat:
		if len(d.buf) < 8 {
			return nil, errShort
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(d.buf))
		d.buf = d.buf[8:]
		return f, nil
	case tagString:
		return d.str()
	case tagList:
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(d.buf)) { // every element takes a byte at least
			return nil, errShort
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case tagMap:
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(d.buf))/2 {
			return nil, errShort
		}
		out := make(map[string]any, n)
		for range n {
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			if out[k], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown value tag %d", tag)
}

func (d *decoder) mapValue() (map[string]any, error) {
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("a map was expected")
	}
	return m, nil
}

// Kinds of job.
const (
	KindJavaScript = "javascript"
	KindJinja      = "jinja"
)

// Job is one piece of code a worker runs.
type Job struct {
	Kind   string // KindJavaScript or KindJinja
	Source string
	// Vars are the declared variables, as plain values.
	Vars map[string]any
	// Timeout bounds the job; the worker stops the code at this limit and
	// the parent kills the worker shortly after.
	Timeout time.Duration
	// MaxOutput bounds the result: JSON bytes of a javascript result,
	// characters of a template's text.
	MaxOutput int
	// MaxCallDepth bounds the javascript call stack.
	MaxCallDepth int
	// MemoryBudget is how much the worker's heap may grow while
	// javascript runs before the code is interrupted (0: no budget besides
	// the worker's hard limit).
	MemoryBudget uint64
	// MaxRange is the longest sequence range() makes in a template.
	MaxRange int
}

// Answer is what a worker sends back for a job.
type Answer struct {
	// Result is what javascript's main returned, as plain values.
	Result map[string]any
	// Text is a template's output.
	Text string
	// ErrType and ErrMsg describe a failure of the code (ErrType is the
	// node error type: CodeNodeError, OutputValidationError,
	// TemplateTransformNodeError).
	ErrType, ErrMsg string
	// Retire asks the parent not to reuse this worker (something of the
	// job may still be running in it).
	Retire bool
}

func (j *Job) encode() ([]byte, error) {
	e := &encoder{buf: make([]byte, 4, 256+len(j.Source))}
	e.str(j.Kind)
	e.str(j.Source)
	e.uvarint(uint64(j.Timeout))
	e.uvarint(uint64(max(j.MaxOutput, 0)))
	e.uvarint(uint64(max(j.MaxCallDepth, 0)))
	e.uvarint(j.MemoryBudget)
	e.uvarint(uint64(max(j.MaxRange, 0)))
	vars := j.Vars
	if vars == nil {
		vars = map[string]any{}
	}
	if err := e.value(vars, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

func decodeJob(b []byte) (*Job, error) {
	d := &decoder{buf: b}
	j := &Job{}
	var err error
	if j.Kind, err = d.str(); err != nil {
		return nil, err
	}
	if j.Source, err = d.str(); err != nil {
		return nil, err
	}
	var n [5]uint64
	for i := range n {
		if n[i], err = d.uvarint(); err != nil {
			return nil, err
		}
	}
	j.Timeout, j.MaxOutput, j.MaxCallDepth, j.MemoryBudget, j.MaxRange = time.Duration(n[0]), int(n[1]), int(n[2]), n[3], int(n[4])
	if j.Vars, err = d.mapValue(); err != nil {
		return nil, err
	}
	return j, nil
}

func (a *Answer) encode() ([]byte, error) {
	e := &encoder{buf: make([]byte, 4, 64+len(a.Text))}
	e.str(a.Text)
	e.str(a.ErrType)
	e.str(a.ErrMsg)
	if a.Retire {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
	var res any
	if a.Result != nil {
		res = a.Result
	}
	if err := e.value(res, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

func decodeAnswer(b []byte) (*Answer, error) {
	d := &decoder{buf: b}
	a := &Answer{}
	var err error
	if a.Text, err = d.str(); err != nil {
		return nil, err
	}
	if a.ErrType, err = d.str(); err != nil {
		return nil, err
	}
	if a.ErrMsg, err = d.str(); err != nil {
		return nil, err
	}
	r, err := d.byte1()
	if err != nil {
		return nil, err
	}
	a.Retire = r == 1
	if a.Result, err = d.mapValue(); err != nil {
		return nil, err
	}
	return a, nil
}

// writeFrame writes b, whose first 4 bytes are left for the length.
func writeFrame(w io.Writer, b []byte) error {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := w.Write(b)
	return err
}

// errTooLarge reports a frame over the reader's limit.
var errTooLarge = errors.New("frame too large")

// readFrame reads one frame of at most limit bytes.
func readFrame(r *bufio.Reader, limit int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:]))
	if n > limit {
		return nil, errTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
