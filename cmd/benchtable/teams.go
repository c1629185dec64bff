package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
)

// teamFigures measures the shared PostgreSQL store (docs/teams.md) against
// the file store in the same run: whole `ask` processes of the info flow,
// and loading the long session's checkpoint. The cluster is a throwaway
// one on loopback with password (scram) authentication and fsync on.
func teamFigures(ctx context.Context, root string, runs int, ls *sessionResult) ([]row, error) {
	c, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrNoBinaries) {
		return []row{{"team store (PostgreSQL) figures", "not measured: " + pgtest.InstallHint, "-", "MISS"}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	url, err := c.NewDatabase()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "benchtable-team-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "upgrade-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	script := filepath.Join(tmp, "script.yaml")
	if err := os.WriteFile(script, []byte(askScript), 0o600); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"), "NO_COLOR=1"}
	// Alternate the two stores in rounds, so that a noisy neighbour weighs
	// on both alike.
	var files, pgs []time.Duration
	const rounds = 5
	per := max(3, runs/rounds)
	for range rounds {
		w, _, err := timeAsks(ctx, bin, script, filepath.Join(tmp, "state-files"), env, per)
		if err != nil {
			return nil, fmt.Errorf("file store: %w", err)
		}
		files = append(files, w...)
		w, _, err = timeAsks(ctx, bin, script, filepath.Join(tmp, "state-pg"), append(env, "UPGRADE_AGENT_STORE="+url), per)
		if err != nil {
			return nil, fmt.Errorf("postgres store: %w", err)
		}
		pgs = append(pgs, w...)
	}
	fm, pm := percentile(files, 0.5), percentile(pgs, 0.5)
	rows := []row{{
		fmt.Sprintf("whole `ask` process, info flow, PostgreSQL store on loopback (scram, fsync on) vs file store, %d runs each, same run", len(files)),
		fmt.Sprintf("median %s vs %s (%.2fx)", ms(pm), ms(fm), float64(pm)/float64(fm)),
		"<= 2x the file store's median", pass(pm <= 2*fm),
	}}

	cp, err := ls.store.Load(ls.id)
	if err != nil {
		return nil, err
	}
	pg, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	cc := *cp
	cc.Seq = 0
	if err := pg.Save(&cc); err != nil {
		return nil, err
	}
	other, err := pgstore.Open(ctx, url, pgstore.Options{}) // another process: nothing cached
	if err != nil {
		return nil, err
	}
	defer other.Close()
	const loads = 60
	fl, pl := timeLoads(ls.store, ls.id, loads), timeLoads(other, ls.id, loads)
	if fl == 0 || pl == 0 {
		return nil, errors.New("loading the long session failed")
	}
	rows = append(rows, row{
		fmt.Sprintf("load of the %d-turn session's checkpoint: PostgreSQL on loopback vs file", cp.Counters.Turns),
		fmt.Sprintf("median %s vs %s (%.2fx)", ms(pl), ms(fl), float64(pl)/float64(fl)),
		"as fast as files: <= 1.5x or within 1 ms", pass(pl <= fl*3/2 || pl <= fl+time.Millisecond),
	})
	return rows, nil
}

// timeLoads is the median of n loads after 5 warm-ups; 0 when one fails.
func timeLoads(s checkpoint.Store, id string, n int) time.Duration {
	var d []time.Duration
	for i := range n + 5 {
		t0 := time.Now()
		if _, err := s.Load(id); err != nil {
			return 0
		}
		if i >= 5 {
			d = append(d, time.Since(t0))
		}
	}
	return percentile(d, 0.5)
}
