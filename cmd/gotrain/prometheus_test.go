package main

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
	"testing"
	"time"
)

// TestPrometheusScrapesTrainingRanks: a real Prometheus server (Debian's
// prometheus package) scrapes the endpoints of a 2-rank training run started
// with gotrain launch, and its query API shows gotrain_tokens_total growing
// for both ranks.
func TestPrometheusScrapesTrainingRanks(t *testing.T) {
	server, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_PROMETHEUS") == "1" {
			t.Fatalf("prometheus not found: %v", err)
		}
		t.Skip("prometheus not installed (apt-get install prometheus)")
	}
	dir, modelCfg, shard := distFixture(t)
	base := adjacentFreePorts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	train := gotrainCmd(ctx, "launch", "--nproc", "2", "--master_port", "0", "train",
		"--config", stageConfig(t, dir, 2, 2), "--model", modelCfg, "--data", shard, "--seq-len", "16",
		"--max-steps", "1000000", "--output-dir", filepath.Join(dir, "run"), "--peak-flops", "1e9", "--threads", "1",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", base))
	var trainOut bytes.Buffer
	train.Stdout, train.Stderr = &trainOut, &trainOut
	if err := train.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { train.Process.Kill(); train.Wait() }()

	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gotrain\n    static_configs:\n"+
		"      - targets: [\"127.0.0.1:%d\", \"127.0.0.1:%d\"]\n", base, base+1)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfgPath, []byte(cfg), 0o644)
	web := freeTCPAddr(t)
	prom := exec.CommandContext(ctx, server, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web, "--log.level=warn")
	var promOut bytes.Buffer
	prom.Stdout, prom.Stderr = &promOut, &promOut
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { prom.Process.Signal(os.Interrupt); prom.Wait() }()

	first := map[string]float64{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
		got, err := queryTokens(web)
		if err != nil {
			continue // Prometheus still starting
		}
		grown := 0
		for _, rank := range []string{"0", "1"} {
			v, ok := got[rank]
			if !ok {
				continue
			}
			if f, seen := first[rank]; !seen {
				first[rank] = v
			} else if v > f {
				grown++
			}
		}
		if grown == 2 {
			t.Logf("gotrain_tokens_total grew on both ranks: %v → %v", first, got)
			return
		}
	}
	t.Fatalf("Prometheus did not see gotrain_tokens_total grow on both ranks (first %v)\ntraining:\n%s\nprometheus:\n%s",
		first, lastLines(trainOut.String(), 10), lastLines(promOut.String(), 10))
}

// queryTokens asks Prometheus's HTTP API for gotrain_tokens_total by rank.
func queryTokens(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape("gotrain_tokens_total"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query status %q", r.Status)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		if v, ok := s.Value[1].(string); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				out[s.Metric["rank"]] = f
			}
		}
	}
	return out, nil
}

func freeTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// adjacentFreePorts finds a port P with P+1 free too (rank r serves P+r).
func adjacentFreePorts(t *testing.T) int {
	t.Helper()
	for range 50 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no two adjacent free ports")
	return 0
}
