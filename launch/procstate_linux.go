package launch

import (
	"bytes"
	"strconv"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// processStopped reports whether the local process pid is stopped
// (/proc/<pid>/stat state T, or t when a debugger holds it): alive, but
// unable to act on SIGTERM until continued, which a message should say
// rather than call it hung or dead.
func processStopped(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := regularfile.Read("process status", "/proc/"+strconv.Itoa(pid)+"/stat", 4096)
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses, so the
	// state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'T' || b[i+2] == 't'
}
