package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// Store is what the pipeline needs to persist a session; FileStore implements it.
type Store interface {
	Load(id string) (*Checkpoint, error)
	Save(cp *Checkpoint) error
}

const (
	checkpointFile = "checkpoint.json"
	historyDir     = "history"
	lockFile       = "lock"
	tempPrefix     = ".checkpoint-"
	tempSuffix     = ".tmp"

	// HistoryLimit is how many earlier checkpoints a session keeps in history/.
	HistoryLimit = 20

	// maxFileSize is the largest checkpoint file the store reads or writes: 16 MiB, 60
	// times a 1,000-turn session (about 270 KB; the state keeps a window of recent
	// exchanges and the effect log is compacted, so real sessions stay far below).
	// Anything larger is refused from its size before a byte of it is read.
	maxFileSize = 16 << 20

	dirPerm  = 0o700
	filePerm = 0o600
)

// FileStore keeps sessions under <state-dir>/sessions/<id>/. Its methods are safe for
// concurrent use as long as each session is written by one holder of its Lock.
type FileStore struct {
	// Now is the clock for created_at and updated_at; nil means time.Now.
	Now func() time.Time
	// Secrets are values that must never reach the disk (the API key, the UpGrade
	// token). Values shorter than 8 bytes are ignored: they would match ordinary text.
	Secrets []string
	// Server, when not empty, is recorded as upgrade_server by Save in a checkpoint
	// that names no server yet: the UpGrade this process works against.
	Server string
	// Ahead, when set, runs in each save after its seq check and before
	// the checkpoint is written: the file audit trail stores there the
	// entries held back for the session (the approval of the write the
	// save announces: docs/teams.md). When it fails, nothing is saved.
	Ahead func(sessionID string) error

	dir string

	// verified remembers, per session, the checkpoint.json this store last decoded in
	// full or wrote itself. Save must not replace a corrupt file, so it checks the file
	// it replaces; when that is still the very file remembered here (same inode, size
	// and modification time), it is known to be sound and the common load-then-save
	// cycle skips reading and decoding it a second time.
	mu       sync.Mutex
	verified map[string]knownFile
	// swept: sessions whose folder this store has cleaned (stray temp files of a
	// crashed save, history past HistoryLimit) by listing it. Later saves in the
	// same process need no listing: they make no strays, and the one history
	// entry that falls out of the window is removed by name.
	swept map[string]bool

	// beforeRename, when set, runs after the new file is written and synced and before
	// it replaces checkpoint.json; a test returns an error to simulate a crash there.
	beforeRename func() error
}

var _ Store = (*FileStore)(nil)

// OpenFileStore opens (creating it if needed) the store in <stateDir>/sessions. Both
// folders are made 0700, also when they existed with wider permissions.
func OpenFileStore(stateDir string) (*FileStore, error) {
	if stateDir == "" {
		return nil, errors.New("open session store: empty state dir")
	}
	dir := filepath.Join(stateDir, "sessions")
	for _, d := range []string{stateDir, dir} {
		if err := ensureDir(d); err != nil {
			return nil, fmt.Errorf("open session store: %w", err)
		}
	}
	return &FileStore{dir: dir}, nil
}

// Dir returns the sessions folder.
func (s *FileStore) Dir() string { return s.dir }

// Path returns the path of the session's checkpoint.json (whether or not it exists).
func (s *FileStore) Path(id string) string {
	return filepath.Join(s.dir, id, checkpointFile)
}

func (s *FileStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Load reads and verifies the session's latest checkpoint. Unknown id: ErrNotFound.
// A file that fails a check: *CorruptError (errors.Is ErrCorrupt), file untouched.
// An older format is migrated in memory; the next Save writes the current format.
func (s *FileStore) Load(id string) (*Checkpoint, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	path := s.Path(id)
	data, fi, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	cp, _, err := decode(path, data, id)
	if err != nil {
		return nil, err
	}
	s.remember(id, &knownFile{seq: cp.Seq, sum: checksumOf(data), fi: fi})
	return cp, nil
}

type knownFile struct {
	seq int
	sum string
	fi  os.FileInfo
}

// remember records a sound checkpoint.json of the session; nil forgets it.
func (s *FileStore) remember(id string, k *knownFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k == nil {
		delete(s.verified, id)
		return
	}
	if s.verified == nil {
		s.verified = make(map[string]knownFile)
	}
	s.verified[id] = *k
}

// known returns what is remembered of the session's checkpoint.json when fi is still
// that file.
func (s *FileStore) known(id string, fi os.FileInfo) (knownFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.verified[id]
	if !ok || !os.SameFile(k.fi, fi) || k.fi.Size() != fi.Size() || !k.fi.ModTime().Equal(fi.ModTime()) {
		return knownFile{}, false
	}
	return k, true
}

// LoadHistory reads an earlier checkpoint of the session from history/<seq>.json.
func (s *FileStore) LoadHistory(id string, seq int) (*Checkpoint, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	path := filepath.Join(s.dir, id, historyDir, strconv.Itoa(seq)+".json")
	data, _, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &sessionError{id: id, err: ErrNotFound, msg: fmt.Sprintf("session %s has no checkpoint %d in its history", id, seq)}
	}
	if err != nil {
		return nil, err
	}
	cp, _, err := decode(path, data, id)
	if err != nil {
		return nil, err
	}
	if cp.Seq != seq {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("seq %d does not match its file name", cp.Seq)}
	}
	return cp, nil
}

// History returns the seqs kept in the session's history, oldest first.
func (s *FileStore) History(id string) ([]int, error) {
	if !ValidID(id) {
		return nil, notFound(id)
	}
	seqs, err := historySeqs(filepath.Join(s.dir, id, historyDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return seqs, err
}

// Save writes cp as the session's new latest checkpoint. It sets format_version,
// seq (the previous seq + 1, where the previous one is cp.Seq as loaded), parent_seq,
// created_at (when zero), updated_at and checksum, and compacts the effect log (every
// started effect and the last FinishedEffectsKept finished ones stay, the others are
// counted in effects_dropped), in cp too once the write succeeded. The checkpoint it
// replaces goes to history/. Save refuses (ErrConflict) when the file on disk is not
// the one cp was loaded from, (ErrCorrupt) when that file is corrupt or cp.Seq is
// MaxSeq, and (ErrSecret) when the encoding contains a configured secret.
//
// The write is atomic: a crash at any instant leaves the old or the new checkpoint.
func (s *FileStore) Save(cp *Checkpoint) error {
	if cp != nil && cp.Seq >= MaxSeq && ValidID(cp.SessionID) {
		// Load accepts MaxSeq, so only a damaged or hand-made file gets here.
		return &CorruptError{Path: s.Path(cp.SessionID), Reason: fmt.Sprintf("seq %d is the largest a checkpoint may have: no save can follow it", cp.Seq)}
	}
	nextp, err := NextOf(cp, s.now(), s.Server)
	if err != nil {
		return err
	}
	id, next := cp.SessionID, *nextp
	data, sum, err := encode(&next)
	if err != nil {
		return fmt.Errorf("save checkpoint of session %s: encode: %w", id, err)
	}
	if err := s.checkSecrets(data); err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	expect := cp.Seq
	err = s.commit(id, data, next.Seq, func(exists bool, diskSeq int, _ string) error {
		switch {
		case !exists && expect != 0:
			return fmt.Errorf("%w: session %s has no checkpoint on disk, but this one follows seq %d", ErrConflict, id, expect)
		case exists && diskSeq != expect:
			return fmt.Errorf("%w: session %s is at seq %d on disk, but this checkpoint follows seq %d (written by someone else meanwhile?)", ErrConflict, id, diskSeq, expect)
		}
		if s.Ahead != nil {
			if err := s.Ahead(id); err != nil {
				return fmt.Errorf("save checkpoint of session %s: store its audit entries first: %w; nothing was written", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	next.Checksum = sum
	*cp = next
	return nil
}

// errUnchanged tells commit that the file on disk is already the one to write.
var errUnchanged = errors.New("unchanged")

// commit atomically makes data (of seq newSeq) the session's checkpoint.json, after
// check approved the current one (exists, its seq and checksum). The current one is
// verified first: a corrupt file is never replaced or moved.
func (s *FileStore) commit(id string, data []byte, newSeq int, check func(exists bool, diskSeq int, diskSum string) error) (failed error) {
	if len(data) > maxFileSize {
		// Load would refuse the file: keep the session as it was rather than brick it.
		return fmt.Errorf("save checkpoint of session %s: %d bytes, larger than a checkpoint may be (%d); nothing was written", id, len(data), maxFileSize)
	}
	dir := filepath.Join(s.dir, id)
	sweep := s.firstSave(id)
	defer func() {
		if failed != nil {
			s.forgetSweep(id) // a failed save may leave a temp file: the next one lists the folder
		}
	}()
	if sweep {
		// Later saves of this process find the folder made and its mode set.
		if err := ensureDir(dir); err != nil {
			return fmt.Errorf("save checkpoint of session %s: %w", id, err)
		}
	}
	final := filepath.Join(dir, checkpointFile)
	fi, err := os.Lstat(final)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	var oldSeq int
	var oldSum string
	if exists {
		k, ok := s.known(id, fi)
		if !ok {
			old, _, err := readFile(final)
			if err == nil {
				var cur *Checkpoint
				if cur, _, err = decode(final, old, id); err == nil {
					k = knownFile{seq: cur.Seq, sum: checksumOf(old)}
				}
			}
			if err != nil {
				return fmt.Errorf("save checkpoint of session %s: refusing to replace it: %w", id, err)
			}
		}
		oldSeq, oldSum = k.seq, k.sum
	}
	if err := check(exists, oldSeq, oldSum); err != nil {
		return err
	}
	if sweep {
		removeStrayTemps(dir)
	}

	tmp, err := writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	if s.beforeRename != nil {
		if err := s.beforeRename(); err != nil {
			return err // a simulated crash: the temp file stays, as it would
		}
	}
	if exists {
		if err := keepHistory(dir, final, oldSeq, sweep); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("save checkpoint of session %s: %w", id, err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("save checkpoint of session %s: %w", id, err)
	}
	if fi, err := os.Lstat(final); err == nil {
		s.remember(id, &knownFile{seq: newSeq, sum: checksumOf(data), fi: fi})
	}
	if exists {
		hd := filepath.Join(dir, historyDir)
		if sweep {
			pruneHistory(hd, HistoryLimit)
		} else if old := oldSeq - HistoryLimit; old > 0 {
			_ = os.Remove(filepath.Join(hd, strconv.Itoa(old)+".json"))
		}
	}
	return nil
}

func (s *FileStore) forgetSweep(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.swept, id)
}

// firstSave reports whether this is the store's first save of session id, and
// records that it no longer is.
func (s *FileStore) firstSave(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.swept[id] {
		return false
	}
	if s.swept == nil {
		s.swept = make(map[string]bool)
	}
	s.swept[id] = true
	return true
}

// writeTemp writes data to a new temp file in dir (so the rename stays within one
// file system) and syncs it; the rename must not make visible a file whose blocks are
// not yet on disk.
func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return "", err
	}
	name := f.Name()
	fail := func(err error) (string, error) {
		_ = f.Close()
		_ = os.Remove(name)
		return "", err
	}
	if err := f.Chmod(filePerm); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// keepHistory makes the current checkpoint history/<seq>.json before it is replaced.
// A hard link costs no copy; where links are not supported the file is copied.
// History is for inspection, so its folder is not fsynced: a crash may lose the
// newest history entry, never the checkpoint.
func keepHistory(dir, final string, seq int, mkdir bool) error {
	hd := filepath.Join(dir, historyDir)
	if mkdir {
		if err := ensureDir(hd); err != nil {
			return err
		}
	}
	target := filepath.Join(hd, strconv.Itoa(seq)+".json")
	// A leftover from a save that crashed before its rename holds the same seq.
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	err := os.Link(final, target)
	if errors.Is(err, fs.ErrNotExist) && !mkdir {
		// The session's first history entry of this process: make the folder.
		if err := ensureDir(hd); err != nil {
			return err
		}
		err = os.Link(final, target)
	}
	if err == nil {
		return nil
	}
	old, _, err := readFile(final)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(hd, old)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func historySeqs(hd string) ([]int, error) {
	entries, err := os.ReadDir(hd)
	if err != nil {
		return nil, err
	}
	var seqs []int
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if seq, err := strconv.Atoi(n); err == nil && seq >= 0 && strconv.Itoa(seq) == n {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// pruneHistory keeps the newest keep entries. Failures are ignored: an extra history
// file costs space, not correctness, and the next save tries again.
func pruneHistory(hd string, keep int) {
	seqs, err := historySeqs(hd)
	if err != nil || len(seqs) <= keep {
		return
	}
	for _, seq := range seqs[:len(seqs)-keep] {
		_ = os.Remove(filepath.Join(hd, strconv.Itoa(seq)+".json"))
	}
}

// removeStrayTemps deletes temp files left by a save that crashed before its rename.
// Only the lock holder saves, so no other save can be using them.
func removeStrayTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, tempPrefix) && strings.HasSuffix(n, tempSuffix) {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}

func (s *FileStore) checkSecrets(data []byte) error {
	return CheckSecrets(data, s.Secrets)
}

// Lock takes the session's lock without waiting: when another process, or another
// Lock in this process, holds it, the result is ErrLocked at once. The lock is
// released by unlock, or by the operating system when the process ends, so a crashed
// process never leaves a session locked.
func (s *FileStore) Lock(id string) (unlock func(), err error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("lock session: invalid session id %q", id)
	}
	dir := filepath.Join(s.dir, id)
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("lock session %s: %w", id, err)
	}
	fl := flock.New(filepath.Join(dir, lockFile), flock.SetPermissions(filePerm))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock session %s: %w", id, err)
	}
	if !ok {
		return nil, locked(id)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Tidy up after a lock on an id that never got a checkpoint (a mistyped
			// `resume ID`), so it does not linger as an empty folder.
			if created {
				if _, err := os.Stat(filepath.Join(dir, checkpointFile)); errors.Is(err, fs.ErrNotExist) {
					_ = os.Remove(filepath.Join(dir, lockFile))
					_ = os.Remove(dir) // fails, harmlessly, when anything else is inside
				}
			}
			_ = fl.Unlock()
		})
	}, nil
}

// Remove deletes the session with its history. A locked session is refused
// (ErrLocked); a corrupt one can be removed.
func (s *FileStore) Remove(id string) error {
	if !ValidID(id) {
		return notFound(id)
	}
	dir := filepath.Join(s.dir, id)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return notFound(id)
	}
	unlock, err := s.Lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	s.remember(id, nil)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove session %s: %w", id, err)
	}
	return nil
}

// Import verifies a checkpoint file from anywhere (say, a CI artifact) and copies it
// into the store under its session_id, which it returns. It never replaces a session
// the store already holds: importing the very checkpoint the store has is a no-op, and
// any other content under that id, at whatever seq, is refused with ErrExists. The
// session's lock is held while importing.
func (s *FileStore) Import(path string) (string, error) {
	data, _, err := readFile(path)
	if err != nil {
		return "", fmt.Errorf("import checkpoint: %w", err)
	}
	cp, migrated, err := decode(path, data, "")
	if err != nil {
		return "", fmt.Errorf("import checkpoint: %w", err)
	}
	id := cp.SessionID
	if migrated {
		// Store the current format, with the same seq and times: the session continues.
		if data, _, err = encode(cp); err != nil {
			return "", fmt.Errorf("import checkpoint %s: encode: %w", path, err)
		}
	}
	if err := s.checkSecrets(data); err != nil {
		return "", fmt.Errorf("import checkpoint %s: %w", path, err)
	}
	unlock, err := s.Lock(id)
	if err != nil {
		return "", err
	}
	defer unlock()
	sum := checksumOf(data)
	err = s.commit(id, data, cp.Seq, func(exists bool, diskSeq int, diskSum string) error {
		switch {
		case !exists:
			return nil
		case diskSeq == cp.Seq && diskSum == sum:
			return errUnchanged
		}
		return &sessionError{id: id, err: ErrExists, msg: fmt.Sprintf(
			"import %s: session %s already exists in the store, at seq %d, and the file (seq %d) differs from it; nothing was changed. To take the file in instead, remove the local session first: upgrade-agent sessions rm %s",
			path, id, diskSeq, cp.Seq, id)}
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return "", err
	}
	return id, nil
}

// readFile reads a whole checkpoint file: only a regular file (or a link to one), of at
// most maxFileSize bytes. Both are checked before the file is opened, so a named pipe
// is never waited on, a device never opened and an oversized file never read; and
// again on the open file, in case it was swapped meanwhile. The read itself stops
// after maxFileSize bytes, in case the file grows meanwhile.
func readFile(path string) ([]byte, os.FileInfo, error) {
	f, st, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := readAtMost(f, st.Size())
	if errors.Is(err, errTooLarge) {
		return nil, nil, &CorruptError{Path: path, Reason: fmt.Sprintf("grew past %d bytes while it was read, larger than any checkpoint", maxFileSize)}
	}
	if err != nil {
		return nil, nil, err
	}
	return data, st, nil
}

var errTooLarge = errors.New("too large")

// readAtMost reads r to its end, expecting about hint bytes, and fails with
// errTooLarge rather than read more than maxFileSize.
func readAtMost(r io.Reader, hint int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(hint, maxFileSize)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, maxFileSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxFileSize {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// openRegular opens a checkpoint file for reading after checking, before and after
// the open, that it is a regular file of at most maxFileSize bytes. A file that fails
// is a *CorruptError; a missing file is fs.ErrNotExist.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	st, err := os.Stat(path) // follows a link: what matters is what would be read
	if errors.Is(err, fs.ErrNotExist) {
		if lst, lerr := os.Lstat(path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, &CorruptError{Path: path, Reason: "a symbolic link to nothing"}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if err := checkRegular(path, st); err != nil {
		return nil, nil, err
	}
	if testHookOpen != nil {
		testHookOpen(path)
	}
	// openFlags has O_NONBLOCK where there is one: should a named pipe have taken the
	// file's place since the Stat, the open returns at once instead of waiting for a
	// writer, and the check below refuses it.
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	if st, err = f.Stat(); err == nil {
		err = checkRegular(path, st)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// testHookOpen, when set, runs right before openRegular opens a file: tests count the
// opens there, and swap the file for a named pipe.
var testHookOpen func(path string)

func checkRegular(path string, st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return &CorruptError{Path: path, Reason: "not a regular file but " + fileKind(st.Mode())}
	}
	if st.Size() > maxFileSize {
		return &CorruptError{Path: path, Reason: fmt.Sprintf("%d bytes, larger than any checkpoint (limit %d)", st.Size(), maxFileSize)}
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// ensureDir creates dir 0700, or narrows it to 0700 when it exists with wider access.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm() != dirPerm {
		if err := os.Chmod(dir, dirPerm); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
