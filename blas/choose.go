package blas

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// Candidate is one GEMM Choose may pick.
type Candidate struct {
	Name string
	Impl Impl
	// Key says what its speed depends on beyond the CPU (the library file,
	// its core type); it is part of the cache key.
	Key string
}

// ChooseOptions configures Choose.
type ChooseOptions struct {
	// Threads splits large products, as for Select.
	Threads int
	// Shapes are the run's largest GEMMs, the ones timed; nil times the
	// 1024³ square.
	Shapes []Shape
	// Square is the extra shape timed for the roofline alone (zero:
	// SquareShape, large enough for any library to reach its peak).
	Square Shape
	// CacheDir holds the per-machine cache of choices ("" caches nothing).
	CacheDir string
	// Budget is the total time spent timing when nothing is cached
	// (0: DefaultChooseBudget).
	Budget time.Duration
	// CPU names the machine in the cache key ("" reads /proc/cpuinfo).
	CPU string
	// Now is the clock for the cache's timestamps (nil: time.Now).
	Now func() time.Time
}

// DefaultChooseBudget keeps the choice to a fraction of a second at start.
const DefaultChooseBudget = 300 * time.Millisecond

// Choice is what Choose picked and why.
type Choice struct {
	Name string `json:"name"`
	// GFLOPS is each candidate's rate on the shapes: total FLOPs over total
	// time, so the faster one is the one a step's GEMMs finish sooner with.
	GFLOPS map[string]float64 `json:"gflops"`
	// Roofline is the highest rate either candidate has reached on this
	// machine (CPU and threads) on any one shape, the run's or the 1024³
	// square, in GFLOP/s: the sgemm roofline MFU is taken against,
	// whichever GEMM runs. The cache keeps the highest ever measured, so a
	// measurement taken under load cannot lower it.
	Roofline float64 `json:"roofline_gflops"`
	// Measured is when the rates were measured; Cached says they came
	// from the cache rather than from this call.
	Measured time.Time `json:"measured"`
	Cached   bool      `json:"-"`
}

// Why says in one line what was chosen and on what evidence.
func (c Choice) Why() string {
	if len(c.GFLOPS) < 2 {
		return "the only GEMM available"
	}
	names := make([]string, 0, len(c.GFLOPS))
	for n := range c.GFLOPS {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.0f", n, c.GFLOPS[n])
	}
	src := "measured now"
	if c.Cached {
		src = "measured " + c.Measured.Format("2006-01-02 15:04") + ", cached"
	}
	return fmt.Sprintf("faster on this run's largest GEMMs: %s GFLOP/s (%s)", strings.Join(parts, ", "), src)
}

// Choose returns the faster of the Go GEMM and OpenBLAS (where it loads)
// on opts.Shapes, timing both once per machine and caching the answer
// under opts.CacheDir keyed by the CPU, the library and its core type, the
// threads and the shapes. The environment (OPENBLAS_CORETYPE) is part of
// the key, not a verdict: kernels it forces are timed like any other.
func Choose(opts ChooseOptions) (Impl, Choice) {
	cands := []Candidate{{Name: ChoiceGo, Impl: NewGo(opts.Threads), Key: "go"}}
	if ob, err := Load(LoadOptions{Threads: opts.Threads}); err == nil {
		in := ob.Info()
		cands = append(cands, Candidate{Name: ChoiceOpenBLAS, Impl: withNativeBF16(ob, opts.Threads),
			Key: "openblas " + in.Library + " " + in.CoreType})
	} else {
		impl := fallbackGo{Go: NewGo(opts.Threads), note: err.Error()}
		cands[0].Impl = impl
	}
	return ChooseAmong(cands, opts)
}

// ChooseAmong is Choose over the given candidates (tests pass their own).
func ChooseAmong(cands []Candidate, opts ChooseOptions) (Impl, Choice) {
	shapes := opts.Shapes
	if len(shapes) == 0 {
		shapes = []Shape{SquareShape}
	}
	key, machine := chooseKey(cands, opts, shapes)
	cache := chooseCache{dir: opts.CacheDir}
	if c, ok := cache.cached(key, machine, cands); ok {
		return pick(cands, c.Name), c
	}
	// The ranks of a job start together: the first measures while the
	// others wait, then read its answer, so every rank of a machine runs
	// the same GEMM (the same bits) and no two measurements share the
	// cores.
	unlock := cache.lock()
	defer unlock()
	if c, ok := cache.cached(key, machine, cands); ok {
		return pick(cands, c.Name), c
	}
	m := cache.read()
	budget := cmp.Or(opts.Budget, DefaultChooseBudget)
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	square := opts.Square
	if square == (Shape{}) {
		square = SquareShape
	}
	c := measureCandidates(cands, shapes, square, budget)
	c.Measured = now()
	c.Roofline = max(c.Roofline, m.Rooflines[machine])
	m.Choices[key] = c
	m.Rooflines[machine] = c.Roofline
	cache.write(m)
	return pick(cands, c.Name), c
}

// RecordRoofline raises the machine's cached roofline (opts' CPU and
// threads) to gflops when that is higher, and returns the roofline: a
// rate measured later (warm, on a quiet machine) than the one cached at
// the choice makes every later run's MFU truer.
func RecordRoofline(opts ChooseOptions, gflops float64) float64 {
	_, machine := chooseKey(nil, opts, nil)
	cache := chooseCache{dir: opts.CacheDir}
	m := cache.read()
	if gflops > m.Rooflines[machine] {
		m.Rooflines[machine] = gflops
		cache.write(m)
	}
	return max(gflops, m.Rooflines[machine])
}

// measureCandidates times every candidate on every shape, alternating
// candidates shape by shape so a drift in the machine's speed hits them
// alike, then on square for the roofline alone (the run's shapes may be
// too small to reach the machine's peak).
func measureCandidates(cands []Candidate, shapes []Shape, square Shape, budget time.Duration) Choice {
	each := budget.Seconds() / float64(len(cands)*(len(shapes)+1))
	seconds := make([]float64, len(cands))
	var flops float64
	c := Choice{GFLOPS: map[string]float64{}}
	for _, s := range shapes {
		flops += s.Flops()
		for i, cd := range cands {
			g := measureShape(cd.Impl, s, each)
			seconds[i] += s.Flops() / (g * 1e9)
			c.Roofline = max(c.Roofline, g)
		}
	}
	if !slices.Contains(shapes, square) {
		for _, cd := range cands {
			c.Roofline = max(c.Roofline, measureShape(cd.Impl, square, each))
		}
	}
	best := 0
	for i, cd := range cands {
		c.GFLOPS[cd.Name] = flops / seconds[i] / 1e9
		if seconds[i] < seconds[best] {
			best = i
		}
	}
	c.Name = cands[best].Name
	return c
}

func (c Choice) complete(cands []Candidate) bool {
	for _, cd := range cands {
		if _, ok := c.GFLOPS[cd.Name]; !ok {
			return false
		}
	}
	return pickIndex(cands, c.Name) >= 0
}

func pickIndex(cands []Candidate, name string) int {
	return slices.IndexFunc(cands, func(c Candidate) bool { return c.Name == name })
}

func pick(cands []Candidate, name string) Impl {
	if i := pickIndex(cands, name); i >= 0 {
		return cands[i].Impl
	}
	return cands[0].Impl
}

// chooseKey hashes what a choice depends on (key) and what the machine's
// roofline depends on (machine: the CPU and the threads).
func chooseKey(cands []Candidate, opts ChooseOptions, shapes []Shape) (key, machine string) {
	cpu := opts.CPU
	if cpu == "" {
		cpu = cpuIdentity()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu %s\nthreads %d\n", cpu, opts.Threads)
	machine = hash(b.String())
	for _, c := range cands {
		fmt.Fprintf(&b, "candidate %s %s\n", c.Name, c.Key)
	}
	for _, s := range shapes {
		fmt.Fprintf(&b, "shape %v\n", s)
	}
	return hash(b.String()), machine
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// cpuIdentity is the CPU's model name, family, model and stepping from
// /proc/cpuinfo: a cache made on one machine must not decide for another.
func cpuIdentity() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			break // the first processor's block is enough
		}
		k, v, ok := strings.Cut(line, ":")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "vendor_id", k == "cpu family", k == "model", k == "model name", k == "stepping":
			parts = append(parts, strings.TrimSpace(v))
		}
	}
	return strings.Join(parts, "/")
}

// chooseCache is a JSON file of choices by key and of the best roofline
// by machine. Reads and writes are best effort: a missing or corrupt cache
// means measuring again, never an error.
type chooseCache struct{ dir string }

type chooseFile struct {
	Choices   map[string]Choice  `json:"choices"`
	Rooflines map[string]float64 `json:"rooflines_gflops"`
}

const chooseCacheFile = "blas-choice.json"

func (c chooseCache) read() chooseFile {
	var f chooseFile
	if c.dir != "" {
		if b, err := regularfile.Read("BLAS choice cache", filepath.Join(c.dir, chooseCacheFile), 1<<20); err == nil {
			if json.Unmarshal(b, &f) != nil {
				f = chooseFile{}
			}
		}
	}
	if f.Choices == nil {
		f.Choices = map[string]Choice{}
	}
	if f.Rooflines == nil {
		f.Rooflines = map[string]float64{}
	}
	return f
}

// cached is the choice recorded for key, with the machine's roofline.
func (c chooseCache) cached(key, machine string, cands []Candidate) (Choice, bool) {
	m := c.read()
	ch, ok := m.Choices[key]
	if !ok || !ch.complete(cands) {
		return Choice{}, false
	}
	ch.Cached = true
	ch.Roofline = max(ch.Roofline, m.Rooflines[machine])
	return ch, true
}

// lock takes the cache's lock file (an advisory lock, released when the
// process ends at the latest) and returns its release; without a cache
// directory, or where the lock cannot be taken, it does nothing.
func (c chooseCache) lock() (unlock func()) {
	if c.dir == "" || os.MkdirAll(c.dir, 0o755) != nil {
		return func() {}
	}
	f, err := os.OpenFile(filepath.Join(c.dir, chooseCacheFile+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return func() {}
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX) != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

func (c chooseCache) write(f chooseFile) {
	if c.dir == "" {
		return
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil || os.MkdirAll(c.dir, 0o755) != nil {
		return
	}
	_ = atomicfile.WriteFile(filepath.Join(c.dir, chooseCacheFile), b)
}
