// Package libsearch finds the files of the native GPU libraries gotrain
// loads at run time (cuBLAS and cuBLASLt, NVRTC, NCCL, NVML) where users
// really have them: the loader path, a CUDA toolkit ($CUDA_HOME,
// $CUDA_PATH, /usr/local/cuda*), a conda environment ($CONDA_PREFIX/lib),
// and Python environments holding NVIDIA's pip wheels ($VIRTUAL_ENV, the
// site-packages of the python3 on PATH, the user site), in the CUDA 12
// layout (site-packages/nvidia/<package>/lib) and the CUDA 13 one
// (site-packages/nvidia/cu13/lib).
//
// It is pure Go and opens nothing: it lists candidates, each with the CUDA
// major it was built for, orders them (the newest major the driver can run
// first, ties in the order above) and says why any was set aside. The
// loaders (cublas, nccl, kernels, metrics) try the candidates in that
// order with Searcher.Load, which records what happened to each, so
// `gotrain doctor` can show the file that loaded and why every other one
// did not. The driver (package cuda) is not searched: libcuda.so.1 comes
// from the loader path, as the driver installs it.
//
// A Searcher holds no state but the Python environment's answer, asked
// once with a short timeout; create one per process (or per command) and
// pass it to every loader.
package libsearch

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Spec describes one library.
type Spec struct {
	// Name is the library's name in reports ("cuBLAS").
	Name string
	// Env is the environment variable whose value (a path or a soname),
	// when set, is the only file tried.
	Env string
	// Sonames are the file names to look for, newest first
	// ("libcublas.so.13", "libcublas.so.12").
	Sonames []string
	// Wheels are the directories below site-packages/nvidia that NVIDIA's
	// CUDA 12 (and 11) pip wheels install the library in ("cublas/lib").
	// The CUDA 13 wheels' shared "cu13/lib" is always searched.
	Wheels []string
	// Unversioned marks a library whose soname does not carry the CUDA
	// major (NCCL's libnccl.so.2, the driver's libnvidia-ml.so.1): its
	// major comes from where it was found, when that says.
	Unversioned bool
}

// Candidate is one file (or, on the loader path, one soname) that may be
// the library.
type Candidate struct {
	// Name is what dlopen is given: an absolute path, or a bare soname
	// resolved by the dynamic loader (Dir "").
	Name string `json:"name"`
	// Source says where it was found: "loader path", "$CUDA_HOME",
	// "/usr/local/cuda-12.4", "$CONDA_PREFIX", "$VIRTUAL_ENV", "python3
	// site-packages", "user site", or the override's variable.
	Source string `json:"source"`
	// Major is the CUDA major the file was built for; 0 when unknown.
	Major int `json:"cuda_major,omitempty"`
	// Skip, when set, says why the candidate is not tried at all.
	Skip string `json:"skip,omitempty"`
}

// Options configures a Searcher. The zero value searches everywhere and
// skips nothing for its CUDA major.
type Options struct {
	// DriverCUDA is the driver's CUDA version as cuDriverGetVersion gives
	// it (13000 for 13.0); a candidate built for a newer CUDA major is
	// skipped. 0: unknown, nothing is skipped for its major.
	DriverCUDA int
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// SkipLoaderPath leaves the dynamic loader's own search out (tests
	// use it to see what is found elsewhere on a machine whose loader path
	// has the library).
	SkipLoaderPath bool
	// PythonSites lists the site-packages directories of the python3 on
	// PATH; nil means ask python3 (once, with a short timeout).
	PythonSites func() []string
	// Root prefixes the fixed system paths (/usr/local/cuda*, ~), for
	// tests; "" is the real root.
	Root string
}

// EnvSkipLoaderPath, set to 1, sets Options.SkipLoaderPath for searchers
// made by FromEnv: a test hook that lets the command line be tested on a
// machine whose loader path holds the libraries.
const EnvSkipLoaderPath = "GOTRAIN_LIBSEARCH_SKIP_LOADER_PATH"

// Searcher lists candidates. Safe for concurrent use.
type Searcher struct {
	opts  Options
	once  sync.Once
	sites []string
}

// New returns a Searcher.
func New(opts Options) *Searcher {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &Searcher{opts: opts}
}

// FromEnv is New with SkipLoaderPath read from $GOTRAIN_LIBSEARCH_SKIP_LOADER_PATH.
func FromEnv(driverCUDA int) *Searcher {
	return New(Options{DriverCUDA: driverCUDA, SkipLoaderPath: os.Getenv(EnvSkipLoaderPath) == "1"})
}

// WithDriver returns a Searcher like s for a driver of the given CUDA
// version, sharing s's Python answer.
func (s *Searcher) WithDriver(driverCUDA int) *Searcher {
	if s == nil {
		return FromEnv(driverCUDA)
	}
	s.once.Do(s.loadSites)
	n := &Searcher{opts: s.opts, sites: s.sites}
	n.opts.DriverCUDA = driverCUDA
	n.once.Do(func() {})
	return n
}

// DriverCUDA is the driver version the Searcher filters by (0: unknown).
func (s *Searcher) DriverCUDA() int { return s.opts.DriverCUDA }

// Override returns the file an override names and where the override came
// from: given (an option set by the caller, described by givenFrom), else
// the spec's environment variable. ok is false when there is none.
func (s *Searcher) Override(spec Spec, given, givenFrom string) (Candidate, bool) {
	if given != "" {
		return Candidate{Name: given, Source: givenFrom, Major: majorOfName(given, spec)}, true
	}
	if spec.Env != "" {
		if p := s.opts.Getenv(spec.Env); p != "" {
			return Candidate{Name: p, Source: "$" + spec.Env, Major: majorOfName(p, spec)}, true
		}
	}
	return Candidate{}, false
}

// place is one directory searched, with where it came from.
type place struct {
	dir    string
	source string
	major  int  // CUDA major the place implies (a versioned toolkit, cu13), 0 if none
	wheel  bool // a site-packages/nvidia/... directory
}

// Candidates lists spec's candidates in the order they should be tried:
// those not skipped first, the newest CUDA major first and ties in search
// order, then the skipped ones with their reasons. Files that do not exist
// are not listed; loader-path sonames always are (only dlopen can tell).
func (s *Searcher) Candidates(spec Spec) []Candidate {
	var out []Candidate
	if !s.opts.SkipLoaderPath {
		for _, n := range spec.Sonames {
			out = append(out, Candidate{Name: n, Source: "loader path", Major: majorOfName(n, spec)})
		}
	}
	seen := map[string]bool{}
	for _, p := range s.places(spec) {
		for _, n := range spec.Sonames {
			path := filepath.Join(p.dir, n)
			st, err := os.Stat(path)
			if err != nil || st.IsDir() {
				continue
			}
			key := path
			if r, err := filepath.EvalSymlinks(path); err == nil {
				key = r
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			c := Candidate{Name: path, Source: p.source, Major: majorOfName(n, spec)}
			if c.Major == 0 {
				c.Major = p.major
			}
			out = append(out, c)
		}
	}
	return s.order(out)
}

// order sets Skip on candidates newer than the driver and sorts.
func (s *Searcher) order(cands []Candidate) []Candidate {
	drvMajor := s.opts.DriverCUDA / 1000
	for i := range cands {
		c := &cands[i]
		if drvMajor > 0 && c.Major > drvMajor {
			c.Skip = fmt.Sprintf("built for CUDA %d, newer than the driver's CUDA %s: update the driver or use a CUDA %d library",
				c.Major, VersionString(s.opts.DriverCUDA), drvMajor)
		}
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		if (a.Skip == "") != (b.Skip == "") {
			if a.Skip == "" {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.Major, a.Major)
	})
	return cands
}

// VersionString writes a cuDriverGetVersion number as "13.0".
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// places lists the directories to search, in order, without duplicates.
func (s *Searcher) places(spec Spec) []place {
	var ps []place
	add := func(p place) {
		if st, err := os.Stat(p.dir); err == nil && st.IsDir() {
			ps = append(ps, p)
		}
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := s.opts.Getenv(env); root != "" {
			for _, d := range toolkitDirs(root) {
				add(place{dir: d, source: "$" + env, major: toolkitMajor(root)})
			}
		}
	}
	for _, root := range s.localToolkits() {
		for _, d := range toolkitDirs(root) {
			add(place{dir: d, source: strings.TrimPrefix(root, s.opts.Root), major: toolkitMajor(root)})
		}
	}
	if prefix := s.opts.Getenv("CONDA_PREFIX"); prefix != "" {
		add(place{dir: filepath.Join(prefix, "lib"), source: "$CONDA_PREFIX"})
	}
	if venv := s.opts.Getenv("VIRTUAL_ENV"); venv != "" {
		sites, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
		for _, site := range sites {
			s.addWheels(add, spec, site, "$VIRTUAL_ENV")
		}
	}
	s.once.Do(s.loadSites)
	for _, site := range s.sites {
		s.addWheels(add, spec, site, "python3 site-packages")
	}
	if home := s.home(); home != "" {
		sites, _ := filepath.Glob(filepath.Join(home, ".local", "lib", "python3*", "site-packages"))
		for _, site := range sites {
			s.addWheels(add, spec, site, "user site")
		}
	}
	// The same directory reached twice (a venv that is also python3's)
	// keeps its first source.
	seen := map[string]bool{}
	return slices.DeleteFunc(ps, func(p place) bool {
		key := p.dir
		if r, err := filepath.EvalSymlinks(p.dir); err == nil {
			key = r
		}
		if seen[key] {
			return true
		}
		seen[key] = true
		return false
	})
}

// addWheels adds the wheel layouts of one site-packages directory: CUDA
// 13's shared nvidia/cu13/lib, then each CUDA 12 package directory.
func (s *Searcher) addWheels(add func(place), spec Spec, site, source string) {
	nv := filepath.Join(site, "nvidia")
	add(place{dir: filepath.Join(nv, "cu13", "lib"), source: source, major: 13, wheel: true})
	for _, w := range spec.Wheels {
		add(place{dir: filepath.Join(nv, w), source: source, major: wheelMajor(site, w), wheel: true})
	}
}

// wheelMajor reads the CUDA major of a CUDA 12-layout package from its
// distribution's metadata directory (nvidia_nccl_cu12-2.21.5.dist-info):
// the directory name of the package itself does not say it.
func wheelMajor(site, wheelDir string) int {
	pkg := strings.SplitN(filepath.ToSlash(wheelDir), "/", 2)[0]
	infos, _ := filepath.Glob(filepath.Join(site, "nvidia_"+pkg+"_cu*-*.dist-info"))
	best := 0
	for _, d := range infos {
		if m := distMajor.FindStringSubmatch(filepath.Base(d)); m != nil {
			if v, err := strconv.Atoi(m[1]); err == nil {
				best = max(best, v)
			}
		}
	}
	return best
}

var distMajor = regexp.MustCompile(`_cu(\d+)-`)

// localToolkits lists /usr/local/cuda, then /usr/local/cuda-X.Y newest
// first.
func (s *Searcher) localToolkits() []string {
	base := filepath.Join(s.opts.Root, "/usr/local")
	roots := []string{filepath.Join(base, "cuda")}
	versioned, _ := filepath.Glob(filepath.Join(base, "cuda-*"))
	slices.SortFunc(versioned, func(a, b string) int { return -compareVersions(toolkitVersion(a), toolkitVersion(b)) })
	return append(roots, versioned...)
}

func (s *Searcher) home() string {
	if s.opts.Root != "" {
		return filepath.Join(s.opts.Root, "home")
	}
	if h := s.opts.Getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// toolkitDirs are the library directories of a CUDA toolkit (or of a
// directory holding the libraries themselves).
func toolkitDirs(root string) []string {
	arch := "x86_64-linux"
	if runtime.GOARCH == "arm64" {
		arch = "sbsa-linux"
	}
	return []string{filepath.Join(root, "lib64"), filepath.Join(root, "lib"), filepath.Join(root, "targets", arch, "lib")}
}

var toolkitRE = regexp.MustCompile(`cuda-(\d+)(?:\.(\d+))?$`)

// toolkitVersion reads [major, minor] from /usr/local/cuda-12.4.
func toolkitVersion(root string) [2]int {
	m := toolkitRE.FindStringSubmatch(filepath.Clean(root))
	if m == nil {
		return [2]int{}
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return [2]int{a, b}
}

func toolkitMajor(root string) int { return toolkitVersion(root)[0] }

func compareVersions(a, b [2]int) int {
	return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
}

var (
	sonameMajor = regexp.MustCompile(`\.so\.(\d+)`)
	wheelCU     = regexp.MustCompile(`/nvidia/cu(\d+)/lib/`)
)

// majorOfName is the CUDA major in a versioned soname (libcublas.so.12 →
// 12, libnvrtc.so.11.2 → 11); 0 for unversioned libraries or other names.
func majorOfName(name string, spec Spec) int {
	if spec.Unversioned {
		if m := wheelCU.FindStringSubmatch(filepath.ToSlash(name)); m != nil {
			v, _ := strconv.Atoi(m[1])
			return v
		}
		return 0
	}
	m := sonameMajor.FindStringSubmatch(filepath.Base(name))
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(m[1])
	return v
}
