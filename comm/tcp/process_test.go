package tcp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// TestRankProcess is not a test of its own: TestKillNineStopsEveryRank runs
// the test binary once per rank with GOTRAIN_COMM_TEST_RANK set, and this
// function is that rank: rendezvous, connect, then all-reduce until the
// Comm fails, which it reports by failing (exit status 1).
func TestRankProcess(t *testing.T) {
	rankEnvVar := os.Getenv("GOTRAIN_COMM_TEST_RANK")
	if rankEnvVar == "" {
		t.Skip("runs only as a child of TestKillNineStopsEveryRank")
	}
	rank, _ := strconv.Atoi(rankEnvVar)
	size, _ := strconv.Atoi(os.Getenv("GOTRAIN_COMM_TEST_SIZE"))
	port, _ := strconv.Atoi(os.Getenv("GOTRAIN_COMM_TEST_PORT"))
	ctx := context.Background()
	st, err := comm.Rendezvous(ctx, comm.RendezvousOptions{Rank: rank, Size: size, Addr: "127.0.0.1", Port: port, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	be := newWorldBackend()
	c, err := New(ctx, st, be, Options{Rank: rank, Size: size, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := be.Alloc(backend.Device, backend.Grads, backend.F32, 100003)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	for {
		if err := c.AllReduce(ctx, buf, comm.Avg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillNineStopsEveryRank runs ranks as real processes, SIGKILLs one in
// the middle of its all-reduces, and expects every other rank to fail with
// an error naming it (rather than waiting out the one-minute timeout).
func TestKillNineStopsEveryRank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, victim := range []int{1, 0} { // rank 0 also serves the store
		t.Run(fmt.Sprintf("kill_rank%d", victim), func(t *testing.T) {
			const size = 3
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()

			procs := make([]*exec.Cmd, size)
			outs := make([]*strings.Builder, size)
			ready := make(chan int, size)
			done := make([]chan error, size)
			for r := range size {
				cmd := exec.Command(os.Args[0], "-test.run=^TestRankProcess$", "-test.v")
				cmd.Env = append(os.Environ(),
					"GOTRAIN_COMM_TEST_RANK="+strconv.Itoa(r),
					"GOTRAIN_COMM_TEST_SIZE="+strconv.Itoa(size),
					"GOTRAIN_COMM_TEST_PORT="+strconv.Itoa(port))
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = cmd.Stdout
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				procs[r], outs[r], done[r] = cmd, &strings.Builder{}, make(chan error, 1)
				go func() {
					sc := bufio.NewScanner(stdout)
					for sc.Scan() {
						if sc.Text() == "ready" {
							ready <- r
						}
						fmt.Fprintln(outs[r], sc.Text())
					}
					done[r] <- cmd.Wait()
				}()
			}
			defer func() {
				for _, p := range procs {
					p.Process.Kill()
				}
			}()
			for range size {
				select {
				case <-ready:
				case <-time.After(30 * time.Second):
					t.Fatal("ranks did not start")
				}
			}
			time.Sleep(200 * time.Millisecond) // well into the all-reduces
			if err := procs[victim].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			for r := range size {
				if r == victim {
					continue
				}
				select {
				case err := <-done[r]:
					if err == nil {
						t.Fatalf("rank %d exited 0 after rank %d died", r, victim)
					}
					t.Logf("rank %d: %s", r, outs[r])
					want := fmt.Sprintf("lost rank %d during all-reduce", victim)
					if !strings.Contains(outs[r].String(), want) {
						t.Fatalf("rank %d output does not say %q:\n%s", r, want, outs[r])
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("rank %d still running 30s after rank %d died", r, victim)
				}
			}
		})
	}
}
