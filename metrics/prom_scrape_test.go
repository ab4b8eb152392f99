package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
)

// promQueryResult is the part of Prometheus's /api/v1/query answer the test
// reads: an instant vector of samples.
type promQueryResult struct {
	Status string `json:"status"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"` // [unix time, "value"]
		} `json:"result"`
	} `json:"data"`
}

// tokensByRank asks the Prometheus server at addr for gotrain_tokens_total.
func tokensByRank(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape("gotrain_tokens_total"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r promQueryResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode query answer: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query status %q", r.Status)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, ok := s.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("sample value %v is not a string", s.Value[1])
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		out[s.Metric["rank"]] = f
	}
	return out, nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A real Prometheus server scrapes two ranks' endpoints while they train
// (growing token counts) and its query API shows both ranks' counters grow.
func TestPrometheusServerScrapesTwoRanks(t *testing.T) {
	server := lookTool(t, "prometheus")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var targets []string
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // the feeders stop before the test returns
	for rank := 0; rank < 2; rank++ {
		p, err := NewPrometheus(rank, PromOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addr, err := p.Serve(ctx, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for step := 1; ; step++ {
				// Ranks train at different rates so their series differ.
				p.ObserveStep(StepRecord{Step: step, Tokens: int64(step * 1024 * (rank + 1)), StepSeconds: 0.1},
					backend.MemoryStats{}, nil)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"+
		"  - job_name: gotrain\n    static_configs:\n      - targets: [%q, %q]\n", targets[0], targets[1])
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freeAddr(t)
	cmd := exec.Command(server, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	first := map[string]float64{}
	var last map[string]float64
	var lastErr error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err // let the deferred stop see it too
			t.Fatalf("prometheus exited early: %v\n%s", err, logs.String())
		case <-time.After(500 * time.Millisecond):
		}
		last, lastErr = tokensByRank(web)
		if lastErr != nil {
			continue // the server is still starting
		}
		grown := 0
		for _, rank := range []string{"0", "1"} {
			v, ok := last[rank]
			if !ok {
				continue
			}
			if _, seen := first[rank]; !seen {
				first[rank] = v
			} else if v > first[rank] {
				grown++
			}
		}
		if grown == 2 {
			return
		}
	}
	t.Fatalf("no growing gotrain_tokens_total for both ranks within 30 s: first %v, last %v (err %v)\n%s",
		first, last, lastErr, logs.String())
}
