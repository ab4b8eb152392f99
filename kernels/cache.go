package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// EnvCache is the root of gotrain's on-disk caches; compiled kernels go in
// its kernels/ directory. Unset, the root is the user cache directory's
// gotrain/ (e.g. ~/.cache/gotrain).
const EnvCache = "GOTRAIN_CACHE"

// Cache stores compiled images as files named by the SHA-256 of everything
// that determines them (see CacheKey). Writes are atomic (temporary file,
// fsync, rename), so concurrent processes sharing a directory see either a
// whole image or none. It is safe for concurrent use.
type Cache struct {
	dir string
}

// DefaultCacheDir is where compiled kernels are cached: $GOTRAIN_CACHE/kernels,
// else <user cache dir>/gotrain/kernels.
func DefaultCacheDir() (string, error) {
	if root := os.Getenv(EnvCache); root != "" {
		return filepath.Join(root, "kernels"), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kernels: no cache directory (set %s): %w", EnvCache, err)
	}
	return filepath.Join(base, "gotrain", "kernels"), nil
}

// OpenCache uses dir (created if missing; "" means DefaultCacheDir).
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kernels: create cache directory: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// CacheKey is the hex SHA-256 identifying one compilation: NVRTC version,
// program name, target kind and architecture, options and source, each
// length-prefixed so that no two different inputs hash the same text.
func CacheKey(nvrtcVersion, name string, kind Kind, arch SM, opts []string, src string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field("gotrain-kernel-cache-v1")
	field(nvrtcVersion)
	field(name)
	field(kind.String())
	field(arch.String())
	field(strings.Join(opts, "\x00"))
	field(src)
	return hex.EncodeToString(h.Sum(nil))
}

func (c *Cache) path(key string, kind Kind) string { return filepath.Join(c.dir, key+kind.ext()) }

// maxCachedImage bounds a cached kernel image read back: a CUBIN or PTX
// of gotrain's kernels is a few MiB.
const maxCachedImage = 256 << 20

// Get returns the cached image data for key, or ok=false when there is
// none or the file does not look like an image of kind (it is then
// ignored, and the next Put replaces it).
func (c *Cache) Get(key string, kind Kind) (data []byte, ok bool, err error) {
	data, err = regularfile.Read("kernel cache entry", c.path(key, kind), maxCachedImage)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kernels: read cache: %w", err)
	}
	if !validImage(kind, data) {
		return nil, false, nil
	}
	return data, true, nil
}

// Put stores data under key atomically.
func (c *Cache) Put(key string, kind Kind, data []byte) error {
	f, err := os.CreateTemp(c.dir, ".tmp-"+key[:16]+"-*")
	if err != nil {
		return fmt.Errorf("kernels: write cache: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path(key, kind))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kernels: write cache %s: %w", c.path(key, kind), err)
	}
	return nil
}
