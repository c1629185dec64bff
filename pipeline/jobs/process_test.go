//go:build unix

package jobs

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// TestHelperWorker is not a test: it is the "worker" process that
// TestDetachedSpawn launches (the test binary run again). It reports how it
// was started and exits.
func TestHelperWorker(t *testing.T) {
	switch os.Getenv("JOBS_TEST_HELPER") {
	case "1":
	case "term":
		// Wait for SIGTERM, as a worker does, and say so in the log.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("ready")
		select {
		case s := <-sigs:
			fmt.Printf("got %v\n", s)
			os.Exit(0)
		case <-time.After(time.Minute):
			fmt.Println("no signal")
			os.Exit(1)
		}
	default:
		t.Skip("helper process only")
	}
	pgrp := syscall.Getpgrp() // Setsid makes the worker lead a new session and process group
	in := make([]byte, 1)
	n, _ := os.Stdin.Read(in)
	fmt.Printf("arg0=%s\n", os.Args[0])
	fmt.Printf("tail=%s\n", strings.Join(os.Args[len(os.Args)-3:], " "))
	fmt.Printf("group_leader=%v\n", pgrp == os.Getpid())
	fmt.Printf("stdin_bytes=%d\n", n)
	fmt.Printf("token=%s\n", os.Getenv("UPGRADE_API_TOKEN"))
	os.Exit(0)
}

// The default spawn runs Exec.Path with argv[0] = WorkerArg0, the global
// args, then "jobs work ID", in its own session, stdin empty, output in the
// job's log, secrets only in the environment.
func TestDetachedSpawn(t *testing.T) {
	r := &Runner{Store: newTestStore(t, nil)}
	r.Exec = Exec{
		Path: os.Args[0],
		Args: []string{"-test.run=^TestHelperWorker$", "--"},
		Env:  append(os.Environ(), "JOBS_TEST_HELPER=1", "UPGRADE_API_TOKEN=tok-from-env"),
	}
	if err := r.Start(context.Background(), "d1", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	rec, err := r.Store.Load("d1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.PID <= 0 || rec.Attempts != 1 {
		t.Fatalf("record %+v", rec)
	}
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(rec.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("helper process %d did not end", rec.PID)
		}
		time.Sleep(5 * time.Millisecond) // an external process: nothing to wait on but its exit
	}
	b, err := os.ReadFile(r.Store.LogPath("d1"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{"arg0=" + WorkerArg0, "tail=jobs work d1", "group_leader=true", "stdin_bytes=0", "token=tok-from-env"} {
		if !strings.Contains(log, want) {
			t.Errorf("worker log lacks %q:\n%s", want, log)
		}
	}
	if fi, err := os.Stat(r.Store.LogPath("d1")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file mode: %v %v", fi, err)
	}
	// The process is gone now, so the next check restarts the job.
	st, err := r.Wait(context.Background(), "d1", 0)
	if err != nil || st.State != actions.JobRunning {
		t.Errorf("wait: %+v %v", st, err)
	}
	if rec, _ := r.Store.Load("d1"); rec.Attempts != 2 {
		t.Errorf("attempts %d after the helper ended, want 2", rec.Attempts)
	}
	// Let the second helper end before the temp dir goes.
	if rec, _ := r.Store.Load("d1"); rec.PID > 0 {
		for processAlive(rec.PID) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestProcessAlive(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if processAlive(0) || processAlive(-1) {
		t.Error("pid 0 or -1 alive")
	}
}

// Cancel sends SIGTERM to the process group of a live worker.
func TestCancelSignalsTheWorker(t *testing.T) {
	r := &Runner{Store: newTestStore(t, nil)}
	r.Exec = Exec{
		Path: os.Args[0],
		Args: []string{"-test.run=^TestHelperWorker$", "--"},
		Env:  append(os.Environ(), "JOBS_TEST_HELPER=term"),
	}
	ctx := context.Background()
	if err := r.Start(ctx, "c1", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	logOf := func() string {
		b, _ := os.ReadFile(r.Store.LogPath("c1"))
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logOf(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("helper not ready: %q", logOf())
		}
		time.Sleep(5 * time.Millisecond) // an external process: nothing to wait on but its output
	}
	// Stand in for the worker's claim and heartbeat.
	rec, err := r.Store.Update("c1", func(rec *Record) error {
		now := time.Now().UTC()
		rec.State, rec.HeartbeatAt = actions.JobRunning, &now
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Cancel(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	for processAlive(rec.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("helper %d still runs after the cancel", rec.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logOf(), "got terminated") {
		t.Errorf("the helper got no SIGTERM: %q", logOf())
	}
}
