package regularfile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// plainReadAllowed lists the plain opens for reading that may stay, by
// "file:function", each with the reason it cannot block on a user's FIFO.
// Everything else that reads a file goes through Open or Read. `make lint`
// runs TestEveryFileReadIsRegular.
var plainReadAllowed = map[string]string{
	"internal/regularfile/regularfile.go:Open":  "the regular-file opener itself: a non-blocking open after the stat",
	"internal/atomicfile/atomicfile.go:SyncDir": "opens a directory gotrain just wrote into, to fsync it",
	"data/shard_writer.go:syncDir":              "opens the output directory gotrain just created, to fsync it",
	"cuda/cudatest/counters.go:Read":            "test helper: the mock libraries' counter file in a test's temporary directory",
	"kernels/emu/build.go:Build":                "reads the repository's own C header to compile the CPU emulation",
}

// TestEveryFileReadIsRegular scans the module's Go sources (tests aside)
// for os.Open, os.ReadFile, ioutil.ReadFile and read-only os.OpenFile: a
// path a user controls (a checkpoint's "latest", a config, a hostfile) may
// be a FIFO, and a plain open of a FIFO blocks until a writer comes, with
// the run holding its output lock and ignoring SIGTERM meanwhile. Reads of
// /proc and the few in plainReadAllowed are exempt.
func TestEveryFileReadIsRegular(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, site := range plainReads(t, path) {
			key := filepath.ToSlash(rel) + ":" + site.fn
			seen[key] = true
			if _, ok := plainReadAllowed[key]; !ok {
				found = append(found, filepath.ToSlash(rel)+":"+strconv.Itoa(site.line)+" ("+site.fn+"): "+site.call)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s reads a file with a plain open: use regularfile.Open or regularfile.Read (or add it to plainReadAllowed with the reason it cannot be a FIFO)", f)
	}
	for key := range plainReadAllowed {
		if !seen[key] {
			t.Errorf("plainReadAllowed lists %s, which no longer opens a file: drop it", key)
		}
	}
}

type readSite struct {
	fn, call string
	line     int
}

// plainReads parses one file and returns its plain read opens.
func plainReads(t *testing.T, path string) []readSite {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []readSite
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := callName(call)
			switch name {
			case "os.Open", "os.ReadFile", "ioutil.ReadFile":
			case "os.OpenFile":
				if len(call.Args) < 2 || opensForWriting(call.Args[1]) {
					return true
				}
			default:
				return true
			}
			if len(call.Args) > 0 && isProcPath(call.Args[0]) {
				return true
			}
			out = append(out, readSite{fn: fd.Name.Name, call: name, line: fset.Position(call.Pos()).Line})
			return true
		})
	}
	return out
}

func callName(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return pkg.Name + "." + sel.Sel.Name
}

// opensForWriting reports whether an os.OpenFile flag expression names
// O_WRONLY, O_RDWR or O_CREATE. A flag held in a variable counts as
// writing: the sources set such variables to write flags only.
func opensForWriting(flag ast.Expr) bool {
	if _, ok := flag.(*ast.Ident); ok {
		return true
	}
	writes := false
	ast.Inspect(flag, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if s := x.Sel.Name; s == "O_WRONLY" || s == "O_RDWR" || s == "O_CREATE" {
				writes = true
			}
			return false
		}
		return true
	})
	return writes
}

// isProcPath reports whether e is a string literal under /proc: kernel
// files that are never FIFOs.
func isProcPath(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && strings.HasPrefix(s, "/proc/")
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
