package libsearch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var cublasSpec = Spec{Name: "cuBLAS", Env: "GOTRAIN_LIBCUBLAS", Sonames: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"},
	Wheels: []string{"cublas/lib"}}

var ncclSpec = Spec{Name: "NCCL", Env: "GOTRAIN_LIBNCCL", Sonames: []string{"libnccl.so.2"}, Wheels: []string{"nccl/lib"}, Unversioned: true}

// touch creates an empty file (and its directories) under root.
func touch(t *testing.T, root string, rel ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{root}, rel...)...)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// machine lays out a host with cuBLAS in every place the search knows:
// two toolkits, $CUDA_HOME, conda, a venv with both wheel layouts, the
// python3 site and the user site.
type machine struct {
	root                                                       string
	env                                                        map[string]string
	cuda124, cuda118, cudaHome, conda, venv13, venv12, py, usr string
}

func newMachine(t *testing.T) *machine {
	root := t.TempDir()
	m := &machine{root: root, env: map[string]string{}}
	m.cuda124 = touch(t, root, "usr/local/cuda-12.4/targets/x86_64-linux/lib/libcublas.so.12")
	m.cuda118 = touch(t, root, "usr/local/cuda-11.8/lib64/libcublas.so.11")
	m.cudaHome = touch(t, root, "opt/cuda/lib64/libcublas.so.12")
	m.conda = touch(t, root, "conda/lib/libcublas.so.12")
	m.venv13 = touch(t, root, "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13")
	m.venv12 = touch(t, root, "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12")
	m.py = touch(t, root, "pyenv/site-packages/nvidia/cublas/lib/libcublas.so.12")
	m.usr = touch(t, root, "home/.local/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12")
	m.env["CUDA_HOME"] = filepath.Join(root, "opt/cuda")
	m.env["CONDA_PREFIX"] = filepath.Join(root, "conda")
	m.env["VIRTUAL_ENV"] = filepath.Join(root, "venv")
	return m
}

func (m *machine) searcher(driver int, loader bool) *Searcher {
	return New(Options{DriverCUDA: driver, Root: m.root, SkipLoaderPath: !loader,
		Getenv:      func(k string) string { return m.env[k] },
		PythonSites: func() []string { return []string{filepath.Join(m.root, "pyenv/site-packages")} }})
}

func names(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// Every place is searched; the newest major the driver runs comes first,
// ties in search order: loader path, $CUDA_HOME, /usr/local toolkits
// (newest first), conda, $VIRTUAL_ENV, python3's site, the user site.
func TestCandidatesOrder(t *testing.T) {
	m := newMachine(t)
	got := m.searcher(13000, true).Candidates(cublasSpec)
	want := []string{"libcublas.so.13", m.venv13, "libcublas.so.12", m.cudaHome, m.cuda124, m.conda, m.venv12, m.py, m.usr,
		"libcublas.so.11", m.cuda118}
	if !slices.Equal(names(got), want) {
		t.Fatalf("candidates:\n%s\nwant:\n%s", strings.Join(names(got), "\n"), strings.Join(want, "\n"))
	}
	wantSource := map[string]string{m.venv13: "$VIRTUAL_ENV", m.cudaHome: "$CUDA_HOME", m.cuda124: "/usr/local/cuda-12.4",
		m.conda: "$CONDA_PREFIX", m.py: "python3 site-packages", m.usr: "user site", "libcublas.so.12": "loader path"}
	for _, c := range got {
		if s, ok := wantSource[c.Name]; ok && c.Source != s {
			t.Errorf("%s: source %q, want %q", c.Name, c.Source, s)
		}
		if c.Skip != "" {
			t.Errorf("%s skipped under a CUDA 13 driver: %s", c.Name, c.Skip)
		}
	}
}

// A CUDA 13 library is skipped, with the reason, under a 12.4 driver;
// the rest keep their order.
func TestCandidatesNewerThanDriver(t *testing.T) {
	m := newMachine(t)
	got := m.searcher(12040, false).Candidates(cublasSpec)
	if last := got[len(got)-1]; last.Name != m.venv13 || !strings.Contains(last.Skip, "CUDA 13, newer than the driver's CUDA 12.4") {
		t.Errorf("last candidate %+v, want the CUDA 13 wheel skipped for the 12.4 driver", last)
	}
	if got[0].Name != m.cudaHome || got[0].Skip != "" {
		t.Errorf("first candidate %+v, want $CUDA_HOME's CUDA 12 library", got[0])
	}
	// Load reports the skip and never opens the file.
	r, ok := m.searcher(12040, false).Load(cublasSpec, "", "", func(c Candidate) (string, error) {
		if c.Name == m.venv13 {
			t.Errorf("opened %s, which the driver cannot run", c.Name)
		}
		return "", errors.New("not a library")
	})
	if ok {
		t.Fatal("Load succeeded with an opener that always fails")
	}
	if a := r.Attempts[len(r.Attempts)-1]; a.Outcome != Skipped || a.Name != m.venv13 {
		t.Errorf("last attempt %+v", a)
	}
}

// Load stops at the first file that opens; the rest are unused, and the
// summary of a failure names every candidate.
func TestLoadOutcomes(t *testing.T) {
	m := newMachine(t)
	s := m.searcher(13000, false)
	var opened []string
	r, ok := s.Load(cublasSpec, "", "", func(c Candidate) (string, error) {
		opened = append(opened, c.Name)
		if c.Name == m.cudaHome {
			return "/resolved/libcublas.so.12.8.4.1", nil
		}
		return "", errors.New("wrong ELF class")
	})
	if !ok || !slices.Equal(opened, []string{m.venv13, m.cudaHome}) {
		t.Fatalf("ok %v, opened %v", ok, opened)
	}
	ch, _ := r.Chosen()
	if ch.Name != m.cudaHome || ch.Path != "/resolved/libcublas.so.12.8.4.1" {
		t.Errorf("chosen %+v", ch)
	}
	for i, a := range r.Attempts {
		want := Unused
		switch i {
		case 0:
			want = Failed
		case 1:
			want = Loaded
		}
		if a.Outcome != want {
			t.Errorf("attempt %d (%s): %s, want %s", i, a.Name, a.Outcome, want)
		}
	}
	r, _ = s.Load(cublasSpec, "", "", func(Candidate) (string, error) { return "", errors.New("wrong ELF class") })
	err := &Error{Result: r, Sentinel: errors.New("cublas: not available"), Hint: "install cuBLAS"}
	for _, want := range []string{m.venv13 + " ($VIRTUAL_ENV): wrong ELF class", m.usr + " (user site)", "install cuBLAS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// An override (the option, else the variable) is the only candidate.
func TestOverride(t *testing.T) {
	m := newMachine(t)
	m.env["GOTRAIN_LIBCUBLAS"] = "/custom/libcublas.so.12"
	s := m.searcher(13000, true)
	r, _ := s.Load(cublasSpec, "", "", func(Candidate) (string, error) { return "", errors.New("missing") })
	if len(r.Attempts) != 1 || r.Attempts[0].Name != "/custom/libcublas.so.12" || r.Override != "$GOTRAIN_LIBCUBLAS" {
		t.Errorf("with the variable set: %+v", r)
	}
	r, _ = s.Load(cublasSpec, "/given.so", "Options.Library", func(Candidate) (string, error) { return "", errors.New("missing") })
	if len(r.Attempts) != 1 || r.Attempts[0].Name != "/given.so" || r.Override != "Options.Library" {
		t.Errorf("with the option given: %+v", r)
	}
}

// NCCL's soname says nothing of CUDA: the wheel's layout or its
// distribution metadata does, and a CUDA 13 NCCL is skipped under a CUDA 12
// driver while the loader path's (major unknown) stays.
func TestUnversionedMajor(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "venv/lib/python3.10/site-packages")
	cu12 := touch(t, site, "nvidia/nccl/lib/libnccl.so.2")
	touch(t, site, "nvidia_nccl_cu12-2.21.5.dist-info/METADATA")
	cu13 := touch(t, root, "other/lib/python3.13/site-packages/nvidia/cu13/lib/libnccl.so.2")
	env := map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv")}
	s := New(Options{DriverCUDA: 12080, Root: root, Getenv: func(k string) string { return env[k] },
		PythonSites: func() []string { return []string{filepath.Join(root, "other/lib/python3.13/site-packages")} }})
	got := s.Candidates(ncclSpec)
	if !slices.Equal(names(got), []string{cu12, "libnccl.so.2", cu13}) {
		t.Fatalf("candidates %v", names(got))
	}
	if got[0].Major != 12 || got[1].Major != 0 || got[2].Major != 13 || got[2].Skip == "" {
		t.Errorf("majors and skips: %+v", got)
	}
}

// The same directory reached twice (a venv that is also python3's) is
// listed once, under its first source.
func TestDuplicatePlaces(t *testing.T) {
	m := newMachine(t)
	s := New(Options{Root: m.root, SkipLoaderPath: true, Getenv: func(k string) string { return m.env[k] },
		PythonSites: func() []string { return []string{filepath.Join(m.root, "venv/lib/python3.12/site-packages")} }})
	n := 0
	for _, c := range s.Candidates(cublasSpec) {
		if c.Name == m.venv12 {
			n++
			if c.Source != "$VIRTUAL_ENV" {
				t.Errorf("source %q", c.Source)
			}
		}
	}
	if n != 1 {
		t.Errorf("venv library listed %d times", n)
	}
}

// python3 is asked once, and a missing or hanging interpreter gives no
// directories instead of an error or a stall.
func TestAskPython(t *testing.T) {
	if dirs := askPython("gotrain-no-such-python", time.Second); dirs != nil {
		t.Errorf("missing interpreter: %v", dirs)
	}
	bin := t.TempDir()
	slow := filepath.Join(bin, "slowpython")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 10\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	if dirs := askPython("slowpython", 200*time.Millisecond); dirs != nil || time.Since(start) > 5*time.Second {
		t.Errorf("hanging interpreter: %v after %v", dirs, time.Since(start))
	}
	fake := filepath.Join(bin, "fakepython")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho /a/site-packages\necho\necho /home/u/.local/site-packages\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if dirs := askPython("fakepython", 5*time.Second); !slices.Equal(dirs, []string{"/a/site-packages", "/home/u/.local/site-packages"}) {
		t.Errorf("dirs %v", dirs)
	}
	calls := 0
	s := New(Options{Root: t.TempDir(), PythonSites: func() []string { calls++; return nil }})
	s.Candidates(cublasSpec)
	s.Candidates(ncclSpec)
	s.WithDriver(12000).Candidates(cublasSpec)
	if calls != 1 {
		t.Errorf("python asked %d times, want once", calls)
	}
}
