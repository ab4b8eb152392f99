package libsearch

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// pythonTimeout bounds the one question asked of python3: an interpreter
// that hangs at start (a broken site hook, a network home directory) must
// not stall a training start by more than this.
const pythonTimeout = 3 * time.Second

// pythonQuery prints the interpreter's site-packages directories and its
// user site, one a line. site.getsitepackages is absent in some old
// virtualenvs; sysconfig's purelib is the same directory there.
const pythonQuery = `import site, sysconfig
try:
    dirs = list(site.getsitepackages())
except Exception:
    dirs = [sysconfig.get_paths()["purelib"]]
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
print("\n".join(dirs))`

func (s *Searcher) loadSites() {
	if s.opts.PythonSites != nil {
		s.sites = s.opts.PythonSites()
		return
	}
	s.sites = askPython("python3", pythonTimeout)
}

// askPython runs the interpreter named py (looked up on PATH) and returns
// the directories it names; nothing when it is absent, fails or is slow.
func askPython(py string, timeout time.Duration) []string {
	path, err := exec.LookPath(py)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", pythonQuery)
	// The user's PYTHONSTARTUP and the like are for interactive shells;
	// -c does not read them, and nothing here needs stdin.
	cmd.Stdin = nil
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			dirs = append(dirs, l)
		}
	}
	return dirs
}
