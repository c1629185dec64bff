package cmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// A checkpoint records the UpGrade it works against (checkpoint
// upgrade_server): the URL, or the embedded simulator's id, which lives in
// the simulator's data file and so travels with a copied state dir. A
// session resumed against another server is refused before its turn runs.

const embeddedServerPrefix = sim.ServerPrefix

// currentServer names the UpGrade of this run as a checkpoint records it.
// With create, an embedded simulator whose data has no id yet is given one
// (written to its data file); without, "" means "a simulator without id".
func (f *Factory) currentServer(create bool) (string, error) {
	if u := f.opts().UpgradeURL; u != "" {
		return normalizeServerURL(u), nil
	}
	if f.embedded == nil {
		return "", nil
	}
	get := f.embedded.Sim().StoredID
	if create {
		get = f.embedded.Sim().Identity
	}
	id, err := get()
	if err != nil || id == "" {
		return "", err
	}
	return embeddedServerPrefix + id, nil
}

func normalizeServerURL(u string) string { return strings.TrimRight(strings.TrimSpace(u), "/") }

// describeServer words a recorded server for a person.
func describeServer(s string) string {
	if id, ok := strings.CutPrefix(s, embeddedServerPrefix); ok {
		return "the embedded simulator " + id
	}
	return "UpGrade " + s
}

// guardServer refuses to continue a session (the checkpoint file, or the
// stored session id) that was proposed against another UpGrade than this
// run's, unless allow; nothing is read from or written to either server
// before. It then has the store record this run's server in checkpoints
// that name none (new sessions, and those written before the field).
func guardServer(f *Factory, store checkpoint.SessionStore, id, file string, allow bool) error {
	recorded := ""
	switch {
	case file != "":
		cp, err := checkpoint.LoadFile(file)
		if err != nil {
			return err // Import reports it with the same words
		}
		recorded, id = cp.UpgradeServer, cp.SessionID
	case id != "":
		cp, err := store.Load(id)
		if err == nil {
			recorded = cp.UpgradeServer
		} else if !errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, checkpoint.ErrCorrupt) {
			return err
		} // an unknown or corrupt session is reported when it is opened
	}
	if recorded != "" && !allow {
		current, err := f.currentServer(false)
		if err != nil {
			return err
		}
		if current != recorded {
			return &UsageError{Err: otherServerError(f, id, recorded, current)}
		}
	}
	current, err := f.currentServer(true)
	if err != nil {
		return err
	}
	store.SetServer(current)
	return nil
}

func otherServerError(f *Factory, id, recorded, current string) error {
	now := "the embedded simulator of state dir " + f.opts().StateDir
	if current != "" {
		now = describeServer(current)
		if strings.HasPrefix(current, embeddedServerPrefix) {
			now += " (state dir " + f.opts().StateDir + ")"
		}
	}
	way := "run with --upgrade-url " + strings.TrimPrefix(describeServer(recorded), "UpGrade ")
	if strings.HasPrefix(recorded, embeddedServerPrefix) {
		way = "run in the state dir that holds that simulator's data (its " + filepath.Join("sim", "data.json") + "), for example the kept state dir of the CI run"
	}
	return fmt.Errorf("session %s was proposed against %s, but this run uses %s; nothing was read or changed. To continue it, %s, or pass --allow-other-server to continue against this one",
		id, describeServer(recorded), now, way)
}
