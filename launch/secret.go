package launch

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Every rank of a job proves it belongs to the job with a secret that the
// launcher makes (docs/threat-model.md), and names the job by an id. Both
// travel in the environment, which only the ranks' owner can read
// (/proc/PID/environ), never on a command line, which every user of both
// machines sees in ps.
const (
	JobSecretEnv = "GOTRAIN_JOB_SECRET" // 64 lowercase hex digits: 32 random bytes
	JobIDEnv     = "GOTRAIN_JOB_ID"     // 16 lowercase hex digits: 8 random bytes
)

// JobEnv returns GOTRAIN_JOB_SECRET and GOTRAIN_JOB_ID for a new job, as
// KEY=VALUE: the values set (non-empty) in environ are kept as they are, so
// a user who exported a secret gets it in every rank; the others are drawn
// from crypto/rand.
func JobEnv(environ []string) []string {
	out := make([]string, 0, 2)
	for _, v := range []struct {
		name  string
		bytes int
	}{{JobSecretEnv, 32}, {JobIDEnv, 8}} {
		if val := lookupEnv(environ, v.name); val != "" {
			out = append(out, v.name+"="+val)
			continue
		}
		b := make([]byte, v.bytes)
		// crypto/rand.Read does not fail on the systems Go supports.
		_, _ = rand.Read(b)
		out = append(out, v.name+"="+hex.EncodeToString(b))
	}
	return out
}

// isJobEnv reports whether KEY=VALUE (or a bare name) is one of the job's
// secret variables, which go to node launchers through stdin only.
func isJobEnv(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	return k == JobSecretEnv || k == JobIDEnv
}

// WithoutJobEnv returns env without GOTRAIN_JOB_SECRET and GOTRAIN_JOB_ID.
func WithoutJobEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), isJobEnv)
}

func lookupEnv(environ []string, name string) string {
	val := ""
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val = v // the last entry wins, as in MergeEnv and exec
		}
	}
	return val
}

// maxStdinEnv bounds the line ReadStdinEnv accepts; the ssh launcher writes
// it into a pipe before ssh starts, so it must fit a pipe's buffer (64 KiB
// on Linux, 16 KiB at least elsewhere).
const maxStdinEnv = 16 << 10

// EncodeStdinEnv is the first line the ssh launcher writes to a node
// launcher's stdin: the job's variables as one JSON object and a newline.
// JSON carries any value (a user's secret may hold spaces or quotes).
func EncodeStdinEnv(env []string) string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return string(b) + "\n"
}

// ReadStdinEnv reads the line EncodeStdinEnv wrote and returns its
// variables as KEY=VALUE, sorted. Only GOTRAIN_JOB_SECRET and
// GOTRAIN_JOB_ID are accepted. It reads no further than the newline, so
// the rest of r stays the lifeline.
func ReadStdinEnv(r *bufio.Reader) ([]string, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxStdinEnv {
			return nil, fmt.Errorf("job variables on stdin: a line longer than %d bytes; stdin of a node launcher carries what gotrain launch sends", maxStdinEnv)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("job variables on stdin: the connection to the launcher closed before they arrived")
		}
		return nil, fmt.Errorf("job variables on stdin: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("job variables on stdin: not a JSON object of strings: %w", err)
	}
	var env []string
	for k, v := range m {
		if !isJobEnv(k) {
			return nil, fmt.Errorf("job variables on stdin: %q is not %s or %s", k, JobSecretEnv, JobIDEnv)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("job variables on stdin: %s holds a NUL byte", k)
		}
		env = append(env, k+"="+v)
	}
	if lookupEnv(env, JobSecretEnv) == "" {
		return nil, fmt.Errorf("job variables on stdin: no %s", JobSecretEnv)
	}
	slices.Sort(env)
	return env, nil
}
