package cmd

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Ids of sessions and jobs are taken as experiments' are: the whole id or
// a unique prefix of at least minIDPrefix characters. Not-found errors name
// the list command that shows the valid ones, and exit 2.

const minIDPrefix = 4

// resolveIDPrefix finds the one id of ids that ref names. notFound is the
// sentinel an unknown ref wraps (errors.Is keeps working for callers).
func resolveIDPrefix(kind, listCmd, ref string, ids []string, notFound error) (string, error) {
	var matches []string
	for _, id := range ids {
		if id == ref {
			return id, nil
		}
		if len(ref) >= minIDPrefix && strings.HasPrefix(id, ref) {
			matches = append(matches, id)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", &UsageError{Err: fmt.Errorf("%w %q; %s shows the %ss there are", notFound, ref, "`upgrade-agent "+listCmd+"`", kind)}
	}
	sort.Strings(matches)
	return "", Usagef("%q matches %d %ss: %s; give more of the id", ref, len(matches), kind, strings.Join(matches, ", "))
}

// resolveSession is the session id ref names in store (files or the team's
// PostgreSQL store).
func resolveSession(store checkpoint.SessionStore, ref string) (string, error) {
	var ids []string
	if files, ok := store.(*checkpoint.FileStore); ok {
		// The folder names are enough: no checkpoint needs decoding.
		entries, err := os.ReadDir(files.Dir())
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return "", err
		}
		for _, e := range entries {
			if e.IsDir() && checkpoint.ValidID(e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	} else {
		list, err := store.List()
		if err != nil {
			return "", err
		}
		for _, s := range list {
			ids = append(ids, s.ID)
		}
	}
	return resolveIDPrefix("session", "sessions list", ref, ids, checkpoint.ErrNotFound)
}

// resolveJob is the job id ref names in store (files, or the team store's
// backend).
func resolveJob(store *jobs.Store, ref string) (string, error) {
	if !jobs.ValidID(ref) {
		return "", &UsageError{Err: fmt.Errorf("%w %q: use letters, digits, - and _ (at most 64)", jobs.ErrInvalidID, ref)}
	}
	var ids []string
	if store.Backend != nil {
		all, err := store.Backend.List()
		if err != nil {
			return "", err
		}
		for id := range all {
			ids = append(ids, id)
		}
	} else {
		entries, err := os.ReadDir(store.Dir())
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return "", err
		}
		for _, e := range entries {
			if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && jobs.ValidID(id) {
				ids = append(ids, id)
			}
		}
	}
	return resolveIDPrefix("job", "jobs list", ref, ids, jobs.ErrNotFound)
}

// experimentNotFound adds the list command to "no experiment matches".
func experimentNotFound(err error) error {
	var re *upgrade.RefError
	if errors.As(err, &re) && len(re.Candidates) == 0 {
		return &UsageError{Err: fmt.Errorf("%w; `upgrade-agent experiments list` shows the experiments there are", err)}
	}
	return err
}
