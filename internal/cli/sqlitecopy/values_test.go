package sqlitecopy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConvert(t *testing.T) {
	at := time.Date(2026, 11, 26, 11, 12, 39, 123456789, time.UTC)
	tests := []struct {
		name    string
		in      any
		pgType  string
		want    any
		wantErr string
	}{
		{"null stays null", nil, "boolean", nil, ""},
		{"1 is true", int64(1), "boolean", true, ""},
		{"0 is false", int64(0), "boolean", false, ""},
		{"driver bool", true, "boolean", true, ""},
		{"text boolean", "false", "boolean", false, ""},
		{"garbage boolean", "maybe", "boolean", nil, "not a boolean"},
		{"driver time goes to UTC", at.In(time.FixedZone("x", 3600)), "timestamp with time zone", at, ""},
		{"gorm's time text", "2026-11-26 11:12:39.123456789+00:00", "timestamp with time zone", at, ""},
		{"RFC 3339 text", "2026-11-26T12:12:39.123456789+01:00", "timestamp with time zone", at, ""},
		{"text with Z", "2026-11-26 11:12:39.123456789Z", "timestamp with time zone", at, ""},
		{"unix seconds", int64(1764155559), "timestamp with time zone", time.Unix(1764155559, 0).UTC(), ""},
		{"not a time", "yesterday", "timestamp with time zone", nil, "not a time"},
		{"whole float to bigint", float64(3), "bigint", int64(3), ""},
		{"fraction to bigint", 3.5, "bigint", nil, "not a whole number"},
		{"digits to bigint", "42", "bigint", int64(42), ""},
		{"int to double", int64(2), "double precision", float64(2), ""},
		{"text to bytea", "abc", "bytea", []byte("abc"), ""},
		{"blob stays bytea", []byte{0, 1}, "bytea", []byte{0, 1}, ""},
		{"number in a text column", int64(7), "text", "7", ""},
		{"bytes in a text column", []byte("hé"), "text", "hé", ""},
		{"NUL in text", "a\x00b", "text", nil, "NUL"},
		{"invalid UTF-8 in text", "\xff", "text", nil, "UTF-8"},
		{"unknown type passes", "x", "tsvector", "x", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := convert(tc.in, tc.pgType)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := tc.want.(time.Time); ok {
				if g, ok := got.(time.Time); !ok || !g.Equal(want) || g.Location() != time.UTC {
					t.Fatalf("got %#v, want %v in UTC", got, want)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestSkipTables(t *testing.T) {
	all := []sourceTable{
		{"apps", "CREATE TABLE apps (id TEXT)"},
		{"schema_migrations", "CREATE TABLE schema_migrations (version INTEGER)"},
		{"sqlite_sequence", "CREATE TABLE sqlite_sequence(name,seq)"},
		{"segments", "CREATE TABLE segments (seq INTEGER PRIMARY KEY)"},
		{"segments_fts", "CREATE VIRTUAL TABLE segments_fts USING fts5(content)"},
		{"segments_fts_data", "CREATE TABLE 'segments_fts_data'(id INTEGER PRIMARY KEY, block BLOB)"},
		{"segments_fts_config", "CREATE TABLE 'segments_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID"},
		{"segment_embeddings", "CREATE TABLE segment_embeddings (node_id TEXT)"},
	}
	keep, skipped := skipTables(all)
	if want := []string{"apps", "segments", "segment_embeddings"}; !slices.Equal(keep, want) {
		t.Errorf("kept %v, want %v", keep, want)
	}
	if want := []string{"segments_fts", "segments_fts_data", "segments_fts_config"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
}

func TestParentsFirst(t *testing.T) {
	tests := []struct {
		name    string
		names   []string
		parents map[string][]string
		want    []string
		wantErr bool
	}{
		{"already in order", []string{"apps", "keys"}, map[string][]string{"keys": {"apps"}}, []string{"apps", "keys"}, false},
		{"child listed first", []string{"messages", "conversations", "apps"},
			map[string][]string{"messages": {"conversations", "apps"}, "conversations": {"apps"}},
			[]string{"apps", "conversations", "messages"}, false},
		{"a key to itself is fine", []string{"nodes"}, map[string][]string{"nodes": {"nodes"}}, []string{"nodes"}, false},
		{"parents outside the copy are ignored", []string{"a"}, map[string][]string{"a": {"elsewhere"}}, []string{"a"}, false},
		{"a cycle is refused", []string{"a", "b"}, map[string][]string{"a": {"b"}, "b": {"a"}}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parentsFirst(tc.names, tc.parents)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
