package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/internal/regularfile"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/trainer"
)

// jobFields lists what every rank must agree on: trainer.RunFields plus the
// device kind (cpu, cuda). The kind, not be.Name(): that names this rank's
// own GPU (cuda:0, cuda:1), which differs between the ranks of one job.
func jobFields(o trainer.Options, be backend.Backend) ([]trainer.Field, error) {
	kind, _, _ := strings.Cut(be.Name(), ":")
	return trainer.RunFields(o, trainer.Field{Name: "device", Value: kind})
}

// jobAuth is what a rank proves at the rendezvous and how it explains where
// that came from.
type jobAuth struct {
	secret []byte
	jobID  string
	// source says where the secret came from ("from GOTRAIN_JOB_SECRET",
	// "derived from ..."), for rank 0's info line.
	source string
	// derived marks a secret computed from values other people can know
	// (a Slurm job id, a port, the run's settings): it keeps other jobs and
	// stray ranks out, not an attacker who reads the same values.
	derived bool
	// hint ends the error of a rank the store refuses: what likely differs.
	hint string
	// warnings are printed by every rank (a secret file others can read).
	warnings []string
}

// minSecretLen is the shortest secret accepted from the user: 32
// characters, 128 bits even as hex, so it cannot be guessed online.
const minSecretLen = 32

// maxSecretFile bounds GOTRAIN_JOB_SECRET_FILE, which holds one line.
const maxSecretFile = 4096

const newSecretAdvice = "export GOTRAIN_JOB_SECRET=$(openssl rand -hex 32) with the same value for every rank"

// resolveJobAuth finds this rank's job secret and job id, in this order:
//
//  1. GOTRAIN_JOB_SECRET (gotrain launch sets it for its ranks; a user may
//     set it by hand), else the contents of GOTRAIN_JOB_SECRET_FILE;
//  2. derived from SLURM_JOB_ID (and the step id when srun started the
//     ranks) plus a digest of the run's settings (fields);
//  3. derived from MASTER_PORT plus that digest, for ranks started by hand
//     or by another launcher: rank 0 warns that it is guessable.
//
// A derived secret includes the settings digest so that someone who knows
// only the job id or port cannot join. The price: ranks started with
// different settings derive different secrets and are refused before the
// field-by-field comparison, so the refusal (hint) names that as the likely
// cause and says how to get the comparison (one shared secret).
//
// The job id is GOTRAIN_JOB_ID, else SLURM_JOB_ID (with the step), else
// "port-<MASTER_PORT>": only values equal on every rank of a job, never the
// settings, so a job id mismatch always means another job.
func resolveJobAuth(env func(string) string, rk launch.Rank, fields []comm.Field) (jobAuth, error) {
	var a jobAuth
	var err error
	if a.jobID, err = jobID(env, rk); err != nil {
		return a, err
	}
	if s := strings.TrimSpace(env("GOTRAIN_JOB_SECRET")); s != "" {
		if len(s) < minSecretLen {
			return a, fmt.Errorf("GOTRAIN_JOB_SECRET is %d characters long; use at least %d random ones: %s", len(s), minSecretLen, newSecretAdvice)
		}
		a.secret = []byte(s)
		a.source = "from GOTRAIN_JOB_SECRET"
		a.hint = "this rank's secret came from GOTRAIN_JOB_SECRET, so rank 0 was given a different one (ranks of one job need the same value; gotrain launch gives each job its own)"
		return a, nil
	}
	if path := env("GOTRAIN_JOB_SECRET_FILE"); path != "" {
		s, warn, err := readSecretFile(path)
		if err != nil {
			return a, err
		}
		if warn != "" {
			a.warnings = append(a.warnings, warn)
		}
		a.secret = []byte(s)
		a.source = "from GOTRAIN_JOB_SECRET_FILE " + path
		a.hint = fmt.Sprintf("this rank's secret came from GOTRAIN_JOB_SECRET_FILE %s, so rank 0 read a different secret", path)
		return a, nil
	}
	digest := settingsDigest(fields)
	const differs = "so the likely cause is that this rank was started with different settings than rank 0 (config, command line, data files or gotrain version); to see which differ, give every rank the same GOTRAIN_JOB_SECRET"
	a.derived = true
	if id := env("SLURM_JOB_ID"); id != "" {
		step := slurmStep(env, rk)
		a.secret = deriveSecret("slurm", id, step, digest)
		a.source = fmt.Sprintf("derived from SLURM_JOB_ID=%s", id)
		if step != "" {
			a.source += ", step " + step
		}
		a.source += " and the run's settings (guessable by users who can read your config and data; for a real one, " + newSecretAdvice + " in the batch script)"
		a.hint = "this rank's secret was derived from SLURM_JOB_ID and the run's settings, " + differs
		return a, nil
	}
	a.secret = deriveSecret("port", fmt.Sprint(rk.MasterPort), digest)
	a.source = fmt.Sprintf("derived from MASTER_PORT=%d and the run's settings", rk.MasterPort)
	a.hint = "this rank's secret was derived from MASTER_PORT and the run's settings, " + differs
	return a, nil
}

// describe is rank 0's line about the job's secret: an info line, or a
// warning when anyone who can read the command line could reproduce it.
func (a jobAuth) describe() string {
	if a.derived && strings.HasPrefix(a.source, "derived from MASTER_PORT") {
		return fmt.Sprintf("warning: no GOTRAIN_JOB_SECRET: the job secret was %s, which anyone who can read your command line and config can reproduce, so the rendezvous (job id %s) keeps out other jobs and stray ranks but not other users on the network; start the ranks with gotrain launch, or %s",
			a.source, a.jobID, newSecretAdvice)
	}
	return fmt.Sprintf("info: job secret %s; job id %s", a.source, a.jobID)
}

// jobID is GOTRAIN_JOB_ID, SLURM_JOB_ID[.step] or port-<MASTER_PORT>.
func jobID(env func(string) string, rk launch.Rank) (string, error) {
	if id := strings.TrimSpace(env("GOTRAIN_JOB_ID")); id != "" {
		if len(id) > comm.MaxJobIDLen {
			return "", fmt.Errorf("GOTRAIN_JOB_ID is %d characters long; at most %d are allowed", len(id), comm.MaxJobIDLen)
		}
		for _, r := range id {
			if r < 0x20 || r == 0x7f {
				return "", fmt.Errorf("GOTRAIN_JOB_ID %q holds a control character; use letters, digits and punctuation", id)
			}
		}
		return id, nil
	}
	if id := strings.TrimSpace(env("SLURM_JOB_ID")); id != "" {
		if step := slurmStep(env, rk); step != "" {
			id += "." + step
		}
		if len(id) > comm.MaxJobIDLen {
			return "", fmt.Errorf("SLURM_JOB_ID is %d characters long; at most %d are allowed", len(id), comm.MaxJobIDLen)
		}
		return id, nil
	}
	return fmt.Sprintf("port-%d", rk.MasterPort), nil
}

// slurmStep is the Slurm step id when srun started the ranks themselves;
// an mpirun inside an allocation starts its ranks outside one shared step.
func slurmStep(env func(string) string, rk launch.Rank) string {
	if rk.Source != launch.SourceSlurm {
		return ""
	}
	if s := env("SLURM_STEP_ID"); s != "" {
		return s
	}
	return env("SLURM_STEPID")
}

// readSecretFile reads a secret file's first line, refusing a short secret
// and warning when other users can read the file.
func readSecretFile(path string) (secret, warning string, err error) {
	f, _, err := regularfile.Open("GOTRAIN_JOB_SECRET_FILE", path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", "", fmt.Errorf("GOTRAIN_JOB_SECRET_FILE %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", "", fmt.Errorf("GOTRAIN_JOB_SECRET_FILE %s is over %d bytes; it should hold one line, e.g. from openssl rand -hex 32", path, maxSecretFile)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	secret = strings.TrimSpace(line)
	if len(secret) < minSecretLen {
		return "", "", fmt.Errorf("GOTRAIN_JOB_SECRET_FILE %s holds %d characters; use at least %d random ones, e.g. openssl rand -hex 32 > %s", path, len(secret), minSecretLen, path)
	}
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		warning = fmt.Sprintf("warning: GOTRAIN_JOB_SECRET_FILE %s can be read by other users (mode %04o); chmod 600 it", path, st.Mode().Perm())
	}
	return secret, warning, nil
}

// settingsDigest is a SHA-256 over every field, name and value.
func settingsDigest(fields []comm.Field) string {
	h := sha256.New()
	for _, f := range fields {
		fmt.Fprintf(h, "%s\x00%s\n", f.Name, f.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// deriveSecret is a secret computed from parts: the same parts give the
// same secret on every rank.
func deriveSecret(parts ...string) []byte {
	m := hmac.New(sha256.New, []byte("gotrain derived job secret v1"))
	for _, p := range parts {
		io.WriteString(m, p)
		m.Write([]byte{0})
	}
	return []byte(hex.EncodeToString(m.Sum(nil)))
}
