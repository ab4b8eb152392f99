package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gotrain/gotrain/internal/atomicfile"
)

// LockFile is the lock a training run holds in its output directory.
const LockFile = ".gotrain.lock"

// Lock is a held output-directory lock: an flock(2) on LockFile, whose
// content names the holder for whoever is refused.
type Lock struct {
	f    *os.File
	path string
}

// lockHolder is the lock file's content.
type lockHolder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (h lockHolder) String() string {
	return fmt.Sprintf("pid %d on host %s (started %s)", h.PID, h.Host, h.Started.Local().Format("2006-01-02 15:04:05 MST"))
}

// LockOutputDir takes the lock of a run's output directory (creating the
// directory), so two runs never write the same checkpoints. A live holder
// makes it fail with an error naming the holder's pid, host and start time.
// The lock is an flock, which the kernel drops when its holder dies: a lock
// file left by a dead process on this host is taken over, and note is told
// so. A lock file written on another host is refused unless that host still
// holds it can be ruled out, since a file system may not share flocks
// between hosts; the error says to remove the file when that run is gone.
func LockOutputDir(dir string, note func(string)) (*Lock, error) {
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("--output-dir: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("lock %s: hostname: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, atomicfile.FileMode)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		flocked := true
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			if errors.Is(err, syscall.EWOULDBLOCK) {
				holder, _ := readHolder(f)
				f.Close()
				return nil, busyError(dir, path, holder, true)
			}
			// No flock on this file system (ENOLCK, EOPNOTSUPP): fall back
			// to the holder's pid below.
			flocked = false
		}
		// A holder that was exiting may have removed the file after we
		// opened it: then our lock is on a dead inode; start over.
		if !sameFile(f, path) {
			f.Close()
			continue
		}
		holder, ok := readHolder(f)
		if ok && (holder.PID != os.Getpid() || holder.Host != host) {
			if holder.Host != host || (!flocked && pidAlive(holder.PID)) {
				f.Close()
				return nil, busyError(dir, path, holder, false)
			}
			if note != nil {
				note(fmt.Sprintf("taking over the stale lock %s of %s: no process holds it any more", path, holder))
			}
		}
		me := lockHolder{PID: os.Getpid(), Host: host, Started: time.Now().UTC()}
		b, _ := json.Marshal(me)
		err = f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt(append(b, '\n'), 0)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return &Lock{f: f, path: path}, nil
	}
	return nil, fmt.Errorf("lock %s: the lock file keeps being replaced; is another run starting in %s?", path, dir)
}

// Release removes the lock file, then drops the lock (in that order, so a
// waiting run never takes a lock on a file about to vanish: see sameFile).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

func busyError(dir, path string, h lockHolder, live bool) error {
	who := "another gotrain run"
	if h.PID != 0 {
		who = "gotrain " + h.String()
	}
	if live {
		return fmt.Errorf("output directory %s is in use by %s; stop that run first, or give this one another --output-dir", dir, who)
	}
	return fmt.Errorf("output directory %s is locked by %s, which this host cannot check; stop that run, or, if it is gone, remove %s",
		dir, who, path)
}

// readHolder reads the lock file's content; ok is false for an empty or
// unreadable file (a holder that died before writing it).
func readHolder(f *os.File) (lockHolder, bool) {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 1<<16), 1<<16))
	if err != nil || len(b) == 0 {
		return lockHolder{}, false
	}
	var h lockHolder
	if json.Unmarshal(b, &h) != nil || h.PID <= 0 {
		return lockHolder{}, false
	}
	return h, true
}

// sameFile reports whether path still names the file f has open.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// pidAlive reports whether a process with this pid exists on this host.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
