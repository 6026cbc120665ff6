package journal

import (
	"fmt"
	"sync"
	"testing"
)

func TestJournal(t *testing.T) {
	j := New(3)
	for i, e := range []Entry{
		{Method: "POST", Route: "/v1/chat-messages", Path: "/v1/chat-messages", Status: 200, KeyID: "k1"},
		{Method: "GET", Route: "/v1/messages", Path: "/v1/messages", Status: 200, KeyID: "k1"},
		{Method: "POST", Route: "/v1/chat-messages", Path: "/v1/chat-messages", Status: 400, KeyID: "k2"},
		{Method: "DELETE", Route: "/v1/conversations/{conversation_id}", Path: "/v1/conversations/c1", Status: 204, KeyID: "k2"},
	} {
		e.BodyBytes = int64(i)
		j.Add(e)
	}
	seqs := func(es []Entry) string {
		s := ""
		for _, e := range es {
			s += fmt.Sprint(e.Seq, " ")
		}
		return s
	}
	tests := []struct {
		name string
		f    Filter
		want string
	}{
		{"the ring keeps the last three, oldest first", Filter{}, "2 3 4 "},
		{"by method, any case", Filter{Method: "post"}, "3 "},
		{"by route pattern", Filter{Route: "/v1/conversations/{conversation_id}"}, "4 "},
		{"by path", Filter{Route: "/v1/conversations/c1"}, "4 "},
		{"by status", Filter{Status: 200}, "2 "},
		{"by key", Filter{KeyID: "k2"}, "3 4 "},
		{"the newest within a limit", Filter{Limit: 2}, "3 4 "},
		{"nothing matches", Filter{Status: 500}, ""},
	}
	for _, tt := range tests {
		if got := seqs(j.List(tt.f)); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
	j.Clear()
	if got := j.List(Filter{}); len(got) != 0 {
		t.Fatalf("after Clear: %v", got)
	}
	j.Add(Entry{Method: "GET"})
	if got := j.List(Filter{}); len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("after Clear, numbering goes on: %+v", got)
	}
}

func TestJournalConcurrent(t *testing.T) {
	j := New(50)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				j.Add(Entry{Method: "GET"})
				_ = j.List(Filter{Limit: 5})
			}
		}()
	}
	wg.Wait()
	got := j.List(Filter{})
	if len(got) != 50 || got[49].Seq != 800 {
		t.Fatalf("%d entries, last %d", len(got), got[len(got)-1].Seq)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq+1 {
			t.Fatalf("entries out of order at %d: %d after %d", i, got[i].Seq, got[i-1].Seq)
		}
	}
}
