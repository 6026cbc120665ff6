package sqlitecopy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3"
)

// convert turns a value as the SQLite driver returns it (nil, int64,
// float64, string, []byte, bool or time.Time) into one fit for a
// PostgreSQL column of type pgType. SQLite keeps any value in any column,
// so the target's type decides: 0/1 become booleans, time text becomes a
// time, numbers in a text column become their decimal text.
func convert(v any, pgType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch pgType {
	case "boolean":
		return toBool(v)
	case "timestamp with time zone", "timestamp without time zone", "date":
		return toTime(v)
	case "bigint", "integer", "smallint":
		return toInt(v)
	case "double precision", "real", "numeric":
		return toFloat(v)
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
		return nil, fmt.Errorf("%T value %v in a bytea column", v, v)
	case "text", "character varying", "character", "json", "jsonb":
		return toText(v)
	}
	return v, nil
}

func toBool(v any) (any, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case int64:
		return x != 0, nil
	case float64:
		return x != 0, nil
	case string, []byte:
		s := strings.ToLower(strings.TrimSpace(asString(x)))
		switch s {
		case "1", "t", "true", "y", "yes", "on":
			return true, nil
		case "0", "f", "false", "n", "no", "off", "":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a boolean", s)
	}
	return nil, fmt.Errorf("%T value %v in a boolean column", v, v)
}

// timeLayouts are the forms SQLite time text comes in: the driver's own
// (what gorm writes) and RFC 3339.
var timeLayouts = append([]string{time.RFC3339Nano}, sqlite3.SQLiteTimestampFormats...)

func toTime(v any) (any, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case int64:
		return time.Unix(x, 0).UTC(), nil
	case float64:
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	case string, []byte:
		s := strings.TrimSpace(asString(x))
		// The driver reads a trailing Z as UTC in every layout; so do we.
		for _, text := range []string{s, strings.TrimSuffix(s, "Z")} {
			for _, layout := range timeLayouts {
				if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
					return t.UTC(), nil
				}
			}
		}
		return nil, fmt.Errorf("%q is not a time", s)
	}
	return nil, fmt.Errorf("%T value %v in a time column", v, v)
}

func toInt(v any) (any, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%v is not a whole number", x)
		}
		return int64(x), nil
	case string, []byte:
		s := strings.TrimSpace(asString(x))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) {
			return int64(f), nil
		}
		return nil, fmt.Errorf("%q is not a whole number", s)
	}
	return nil, fmt.Errorf("%T value %v in an integer column", v, v)
}

func toFloat(v any) (any, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case string, []byte:
		s := strings.TrimSpace(asString(x))
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%T value %v in a number column", v, v)
}

func toText(v any) (any, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	default:
		return nil, fmt.Errorf("%T value in a text column", v)
	}
	// PostgreSQL text is valid UTF-8 without NUL characters; SQLite takes
	// anything.
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("text that is not valid UTF-8 (%d bytes)", len(s))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("text with a NUL character (%d bytes)", len(s))
	}
	return s, nil
}

func asString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v.(string)
}

// sizeOf estimates how many bytes a value adds to an insert.
func sizeOf(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	}
	return 8
}
