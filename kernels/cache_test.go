package kernels_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/kernels"
)

func TestCacheKeyDistinguishesInputs(t *testing.T) {
	base := kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 80, []string{"-x"}, "src")
	if len(base) != 64 {
		t.Fatalf("key %q is not a hex SHA-256", base)
	}
	if again := kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 80, []string{"-x"}, "src"); again != base {
		t.Errorf("same inputs, different keys")
	}
	others := []string{
		kernels.CacheKey("12.4", "a.cu", kernels.CUBIN, 80, []string{"-x"}, "src"),
		kernels.CacheKey("11.8", "b.cu", kernels.CUBIN, 80, []string{"-x"}, "src"),
		kernels.CacheKey("11.8", "a.cu", kernels.PTX, 80, []string{"-x"}, "src"),
		kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 90, []string{"-x"}, "src"),
		kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 80, nil, "src"),
		kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 80, []string{"-x"}, "src2"),
		// Moving text between fields must not collide.
		kernels.CacheKey("11.8", "a.c", kernels.CUBIN, 80, []string{"-x"}, "usrc"),
		kernels.CacheKey("11.8", "a.cu", kernels.CUBIN, 80, []string{"-", "x"}, "src"),
	}
	seen := map[string]int{base: -1}
	for i, k := range others {
		if j, dup := seen[k]; dup {
			t.Errorf("variant %d has the same key as %d", i, j)
		}
		seen[k] = i
	}
}

func TestCachePutGet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "kernels")
	c, err := kernels.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := kernels.CacheKey("11.8", "k.cu", kernels.PTX, 80, nil, "src")
	if _, ok, err := c.Get(key, kernels.PTX); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	ptx := []byte(".version 7.8\n.target sm_80\n.address_size 64\n")
	if err := c.Put(key, kernels.PTX, ptx); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get(key, kernels.PTX)
	if !ok || err != nil || string(got) != string(ptx) {
		t.Fatalf("Get = %q, %v, %v", got, ok, err)
	}
	// The same key as another kind is another entry.
	if _, ok, _ := c.Get(key, kernels.CUBIN); ok {
		t.Errorf("PTX entry returned for CUBIN")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != key+".ptx" {
		t.Errorf("cache directory holds %v, want only %s.ptx (no temporary files)", entries, key)
	}
	// Text that is not PTX is treated as absent.
	if err := c.Put(key, kernels.PTX, []byte("truncated")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(key, kernels.PTX); ok || err != nil {
		t.Errorf("invalid entry: ok=%v err=%v, want a miss", ok, err)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv(kernels.EnvCache, root)
	dir, err := kernels.DefaultCacheDir()
	if err != nil || dir != filepath.Join(root, "kernels") {
		t.Errorf("DefaultCacheDir = %q, %v; want %q", dir, err, filepath.Join(root, "kernels"))
	}
	t.Setenv(kernels.EnvCache, "")
	t.Setenv("XDG_CACHE_HOME", root)
	dir, err = kernels.DefaultCacheDir()
	if err != nil || dir != filepath.Join(root, "gotrain", "kernels") {
		t.Errorf("DefaultCacheDir without $%s = %q, %v", kernels.EnvCache, dir, err)
	}
}
