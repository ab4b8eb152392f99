package kernels

import (
	"embed"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// The kernel sources: the prelude (prelude.cuh, then packed.cuh) first,
// then every *.cu file of this directory in name order. testdata/ holds
// test kernels and is not part of the program.
//
//go:embed prelude.cuh packed.cuh *.cu
var sourceFS embed.FS

// Source is one file of the kernel program.
type Source struct {
	Name string // file name, e.g. "layernorm.cu"
	Text string
}

// Prelude is the device helpers every kernel source may use: prelude.cuh,
// then packed.cuh (16-byte vector access) after a #line directive, so
// compile errors name the header a developer edits.
func Prelude() string {
	var sb strings.Builder
	for i, name := range []string{"prelude.cuh", "packed.cuh"} {
		b, err := sourceFS.ReadFile(name)
		if err != nil {
			panic("kernels: " + name + " is not embedded") // a build without it is broken
		}
		if i > 0 {
			sb.WriteString("\n#line 1 \"" + name + "\"\n")
		}
		sb.Write(b)
	}
	return sb.String()
}

// Sources are the *.cu files, in name order, without the prelude.
func Sources() []Source {
	names, err := fs.Glob(sourceFS, "*.cu")
	if err != nil {
		panic("kernels: bad embedded glob")
	}
	slices.Sort(names)
	out := make([]Source, 0, len(names))
	for _, n := range names {
		b, err := sourceFS.ReadFile(n)
		if err != nil {
			panic("kernels: embedded file vanished: " + n)
		}
		out = append(out, Source{Name: n, Text: string(b)})
	}
	return out
}

// ProgramName is the name NVRTC reports errors under.
const ProgramName = "gotrain_kernels.cu"

// Program is the whole kernel program as NVRTC compiles it: the prelude and
// every source, each preceded by a #line directive so compile errors name
// the file and line a developer edits.
func Program() string {
	var sb strings.Builder
	sb.WriteString("#line 1 \"prelude.cuh\"\n")
	sb.WriteString(Prelude())
	for _, s := range Sources() {
		sb.WriteString("\n#line 1 \"" + s.Name + "\"\n")
		sb.WriteString(s.Text)
	}
	return sb.String()
}

// kernelDecl matches a kernel definition. Every kernel is declared on one
// line as `extern "C" __global__ void NAME(`, which is what makes it
// launchable by name and countable here.
var kernelDecl = regexp.MustCompile(`(?m)^extern "C" __global__ void ([A-Za-z_][A-Za-z0-9_]*)\(`)

// KernelNames lists every kernel of the program, in source order.
func KernelNames() []string {
	var names []string
	for _, s := range Sources() {
		for _, m := range kernelDecl.FindAllStringSubmatch(s.Text, -1) {
			names = append(names, m[1])
		}
	}
	return names
}
