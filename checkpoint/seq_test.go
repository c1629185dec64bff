package checkpoint

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestSeqIsValidated(t *testing.T) {
	tests := []struct {
		name      string
		seq, prev int
		want      string // "" when valid
	}{
		{"first", 1, 0, ""},
		{"at the limit", MaxSeq, MaxSeq - 1, ""},
		{"zero", 0, 0, "seq: 0 is out of range"},
		{"negative", -1, -2, "seq: -1 is out of range"},
		{"past the limit", MaxSeq + 1, MaxSeq, fmt.Sprintf("seq: %d is out of range (1 to %d)", MaxSeq+1, MaxSeq)},
		{"int maximum", math.MaxInt, math.MaxInt - 1, fmt.Sprintf("seq: %d is out of range", math.MaxInt)},
		{"parent not seq - 1", 1, 5, "parent_seq: 5, but a checkpoint of seq 1 follows seq 0"},
		{"parent equal to seq", 4, 4, "parent_seq: 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			data := fileOf(t, "seq1", func(cp *Checkpoint) { cp.Seq, cp.ParentSeq = tt.seq, tt.prev })
			path := writeSession(t, s, "seq1", data)
			_, err := s.Load("seq1")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCorrupt(t, "Load", err, path, tt.want)
			// List reads the header only, and sees it too.
			if list, err := s.List(); err != nil || len(list) != 1 || list[0].Status != StatusCorrupt {
				t.Errorf("List = %+v, %v", list, err)
			}
		})
	}
}

// Save never overflows seq: a checkpoint at MaxSeq (loadable, but only a hand-made
// file has it) cannot be followed, and saying so names the file and the field.
func TestSaveAtMaxSeq(t *testing.T) {
	s := newStore(t)
	path := writeSession(t, s, "seq2", fileOf(t, "seq2", func(cp *Checkpoint) { cp.Seq, cp.ParentSeq = MaxSeq-1, MaxSeq-2 }))
	cp, err := s.Load("seq2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(cp); err != nil || cp.Seq != MaxSeq {
		t.Fatalf("Save to MaxSeq: %v, seq %d", err, cp.Seq)
	}
	if _, err := s.Load("seq2"); err != nil {
		t.Fatalf("Load at MaxSeq: %v", err)
	}
	before := readBytes(t, path)
	err = s.Save(cp)
	wantCorrupt(t, "Save after MaxSeq", err, path, fmt.Sprintf("seq %d is the largest a checkpoint may have", MaxSeq))
	if cp.Seq != MaxSeq || !bytes.Equal(readBytes(t, path), before) {
		t.Error("the refused save changed something")
	}
}

func TestHistoryEntryMustHoldItsSeq(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "hseq1")
	for range 3 {
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	hd := filepath.Join(s.Dir(), "hseq1", historyDir)
	moved := filepath.Join(hd, "7.json")
	if err := os.Rename(filepath.Join(hd, "2.json"), moved); err != nil {
		t.Fatal(err)
	}
	_, err := s.LoadHistory("hseq1", 7)
	wantCorrupt(t, "LoadHistory", err, moved, "seq 2 does not match its file name")
}
