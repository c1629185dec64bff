package main

import (
	"fmt"
	"os"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

// checkpointFigures times Save and Load of the long session's last
// checkpoint (written by the real pipeline after all its turns), on disk
// with its fsyncs and on tmpfs, and reports how the file grew.
func checkpointFigures(ls *sessionResult) ([]row, error) {
	cp, err := ls.store.Load(ls.id)
	if err != nil {
		return nil, err
	}
	type place struct {
		name string
		dir  string
	}
	var places []place
	disk, err := os.MkdirTemp("", "benchtable-checkpoint-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(disk)
	places = append(places, place{"disk", disk})
	if shm, err := os.MkdirTemp("/dev/shm", "benchtable-checkpoint-"); err == nil {
		defer os.RemoveAll(shm)
		places = append(places, place{"tmpfs", shm})
	}

	const rounds = 60
	var rows []row
	var size int64
	for _, p := range places {
		store, err := checkpoint.OpenFileStore(p.dir)
		if err != nil {
			return nil, err
		}
		c := *cp
		c.Seq = 0 // a fresh store: the first save starts the chain
		var saves, loads []time.Duration
		for range rounds {
			t0 := time.Now()
			if err := store.Save(&c); err != nil {
				return nil, fmt.Errorf("%s: save: %w", p.name, err)
			}
			saves = append(saves, time.Since(t0))
			t0 = time.Now()
			if _, err := store.Load(ls.id); err != nil {
				return nil, fmt.Errorf("%s: load: %w", p.name, err)
			}
			loads = append(loads, time.Since(t0))
		}
		fi, err := os.Stat(store.Path(ls.id))
		if err != nil {
			return nil, err
		}
		size = fi.Size()
		save, load := percentile(saves[5:], 0.5), percentile(loads[5:], 0.5)
		note := "with fsync of file and folder"
		if p.name == "tmpfs" {
			note = "fsync nearly free"
		}
		rows = append(rows, row{
			fmt.Sprintf("checkpoint of a %d-turn session, %s (%s)", cp.Counters.Turns, p.name, note),
			fmt.Sprintf("save %s, load %s (median of %d; %d KiB)", ms(save), ms(load), rounds-5, size/1024),
			"each <= 10 ms", pass(save <= 10*time.Millisecond && load <= 10*time.Millisecond),
		})
	}
	s10, s100, sN := ls.sizes[10], ls.sizes[100], ls.sizes[cp.Counters.Turns]
	rows = append(rows, row{"checkpoint file size at turn 10 / 100 / " + fmt.Sprint(cp.Counters.Turns),
		fmt.Sprintf("%d / %d / %d KiB", s10/1024, s100/1024, sN/1024),
		"grows at most linearly", pass(s100 <= 10*s10 && sN*100 <= s100*int64(cp.Counters.Turns))})
	return rows, nil
}
