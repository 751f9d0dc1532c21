package queue

import (
	"fmt"
	"testing"
)

// TestInternTable: a value the table keeps is looked up without an
// allocation and is the same string each time; the table keeps at most
// internMax values and makes the others each time, unchanged.
func TestInternTable(t *testing.T) {
	m := internTable{}
	kept := []byte("send_email")
	first := m.of(kept)
	if allocs := testing.AllocsPerRun(100, func() { _ = m.of(kept) }); allocs != 0 {
		t.Errorf("looking up a kept value allocates %v times, want 0", allocs)
	}
	for i := range 2 * internMax {
		b := []byte(fmt.Sprintf("kind_%d", i))
		if got := m.of(b); got != string(b) {
			t.Fatalf("of(%q) = %q", b, got)
		}
	}
	if len(m) != internMax {
		t.Errorf("the table keeps %d values, want at most %d", len(m), internMax)
	}
	if got := m.of(kept); got != first || got != "send_email" {
		t.Errorf("of(%q) = %q after the table filled, want %q", kept, got, first)
	}
	var s internedText
	s.table = m
	if err := s.ScanBytes(nil); err == nil {
		t.Error("ScanBytes(NULL) = nil, want an error (the columns are NOT NULL)")
	}
}
