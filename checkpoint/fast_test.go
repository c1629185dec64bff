package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The fast paths (encode's splice, decodeFast, scanJSON) must agree with
// encoding/json exactly; these tests and fuzz targets hold them to it.

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	states := map[string]json.RawMessage{
		"compact":             json.RawMessage(`{"a":[1,2.50,-3e2],"b":"x"}`),
		"with whitespace":     json.RawMessage(" {\n \"a\" : [ 1 , 2 ] ,\t\"b\": \"sp ace\" }\n"),
		"html and separators": json.RawMessage("{\"h\":\"<a href='x'>&amp;</a>\",\"u\":\"\u2028\u2029\",\"e\":\"\\u003c\"}"),
		"nil":                 nil,
		"null":                json.RawMessage(`null`),
		"scalar":              json.RawMessage(`"just a string"`),
		"long":                longState(t, 50, 10),
	}
	for name, state := range states {
		t.Run(name, func(t *testing.T) {
			cp := sample(t, "enc1")
			cp.State = state
			got, sum, err := encode(cp)
			if err != nil {
				t.Fatal(err)
			}
			ref := *cp
			ref.Checksum = sum
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(&ref); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, buf.Bytes()) {
				t.Errorf("encode differs from encoding/json:\n got %s\nwant %s", got, buf.Bytes())
			}
		})
	}
	cp := sample(t, "enc2")
	cp.State = json.RawMessage(`{"a":}`)
	if _, _, err := encode(cp); err == nil {
		t.Error("encode accepted an invalid state")
	}
}

func TestDecodeFastIsUsed(t *testing.T) {
	golden := readBytes(t, filepath.Join("testdata", "golden-v2.json"))
	cp, ok := decodeFast(golden)
	if !ok {
		t.Fatal("decodeFast does not accept the golden file: every Load takes the slow path")
	}
	slow := new(Checkpoint)
	if err := decodeStrict(golden, slow); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slow, cp); diff != "" {
		t.Errorf("fast decode differs (-encoding/json +fast):\n%s", diff)
	}
}

func TestSaveNoticesTamperingAfterLoad(t *testing.T) {
	tests := map[string]func(path string, data []byte){
		"different size": func(path string, data []byte) {
			_ = os.WriteFile(path, bytes.Replace(data, []byte("hello"), []byte("hell"), 1), 0o600)
		},
		"same size, later mtime": func(path string, data []byte) {
			_ = os.WriteFile(path, bytes.Replace(data, []byte("hello"), []byte("jello"), 1), 0o600)
			_ = os.Chtimes(path, time.Time{}, time.Now().Add(time.Hour))
		},
		"replaced by another file": func(path string, data []byte) {
			tmp := path + ".x"
			_ = os.WriteFile(tmp, bytes.Replace(data, []byte("hello"), []byte("jello"), 1), 0o600)
			_ = os.Rename(tmp, path)
		},
	}
	for name, tamper := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			if err := s.Save(sample(t, "tamp1")); err != nil {
				t.Fatal(err)
			}
			cp, err := s.Load("tamp1")
			if err != nil {
				t.Fatal(err)
			}
			path := s.Path("tamp1")
			tamper(path, readBytes(t, path))
			bad := readBytes(t, path)
			if err := s.Save(cp); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Save over a file changed since Load: got %v, want ErrCorrupt", err)
			}
			if !bytes.Equal(readBytes(t, path), bad) {
				t.Error("the tampered file was replaced")
			}
		})
	}
}

func TestLatestSkipsTamperedNewest(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"older1", "newer1"} {
		cp := sample(t, id)
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	// The header of newer1 still reads fine; only the checksum shows the damage.
	path := s.Path("newer1")
	if err := os.WriteFile(path, bytes.Replace(readBytes(t, path), []byte("hello"), []byte("jello"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Latest(StatusAwaitingConfirmation)
	if err != nil || got != "older1" {
		t.Errorf("Latest = %q, %v; want older1", got, err)
	}
}

func FuzzScanJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `[]`, ` {"a" : [1, -0.5e+3, true, false, null]} `, `"\u00e9\n"`, `{"a":1,}`,
		`[1 2]`, `01`, `-`, `1.`, `1e`, `"\x01"`, `"\uZZZZ"`, `nul`, "\"\xff\"", `{"a"}`, `[[[[]]]]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, compact := scanJSON(b)
		if want := json.Valid(b); valid != want {
			t.Fatalf("scanJSON valid = %v, json.Valid = %v", valid, want)
		}
		if !valid {
			return
		}
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			t.Fatal(err)
		}
		if want := bytes.Equal(c.Bytes(), b); compact != want {
			t.Fatalf("scanJSON compact = %v, but compacting changes the bytes: %v", compact, !want)
		}
	})
}

func TestScanJSONDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1} {
		b := append(bytes.Repeat([]byte("["), n), bytes.Repeat([]byte("]"), n)...)
		valid, _ := scanJSON(b)
		if valid != json.Valid(b) {
			t.Errorf("depth %d: scanJSON %v, json.Valid %v", n, valid, json.Valid(b))
		}
	}
}

func FuzzDecodeFast(f *testing.F) {
	for _, name := range []string{"golden-v2.json", "golden-v1.json"} {
		golden, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(golden, false)
		f.Add(bytes.Replace(golden, []byte(`"state":{`), []byte(`"state": {`), 1), true)
		f.Add(bytes.Replace(golden, []byte(`"state":`), []byte(`"state":1,"state":`), 1), true)
		f.Add(bytes.Replace(golden, []byte(`"effects":[`), []byte(`"effects" : null , "effects":[`), 1), true)
		f.Add(bytes.Replace(golden, []byte(`"effects":[`), []byte(`"effects":[],"summary":null,"effects":[`), 1), true)
	}
	f.Add(fileOf(f, "fast1", func(cp *Checkpoint) { cp.Effects = effectLog(MaxStartedEffects+3, EffectStarted) }), false)
	f.Add(fileOf(f, "fast1", func(cp *Checkpoint) { cp.Effects = nil }), false)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = reseal(data)
		}
		fast, ok := decodeFast(data)
		if !ok {
			return
		}
		slow := new(Checkpoint)
		serr := decodeStrict(data, slow)
		if ferr := fast.Validate(); ferr != nil {
			// The fast decode may stop early in an effect log that has too many
			// started effects; the full decode must then be refused too, for the same
			// reason when it decodes at all.
			if serr != nil {
				return
			}
			if verr := slow.Validate(); verr == nil || verr.Error() != ferr.Error() {
				t.Fatalf("fast decode invalid (%v), full decode: %v", ferr, verr)
			}
			return
		}
		if serr != nil {
			t.Fatalf("decodeFast accepted what encoding/json rejects: %v", serr)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("decodeFast differs (-encoding/json +fast):\n%s", diff)
		}
	})
}

func TestLatestWithLargeHeader(t *testing.T) {
	// A header longer than the prefix Latest reads first: it must read the whole file.
	s := newStore(t)
	small := sample(t, "small1")
	small.Status, small.Interrupt = StatusIdle, nil
	if err := s.Save(small); err != nil {
		t.Fatal(err)
	}
	big := sample(t, "big1")
	params := mustJSON(t, map[string]string{"description": string(bytes.Repeat([]byte("x"), 2*headerPrefix))})
	big.Interrupt.Confirmation.Params = params
	if err := s.Save(big); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Latest(StatusAwaitingConfirmation); err != nil || got != "big1" {
		t.Errorf("Latest = %q, %v; want big1", got, err)
	}
	if got, err := s.Latest(); err != nil || got != "big1" {
		t.Errorf("Latest() = %q, %v; want big1", got, err)
	}
}
