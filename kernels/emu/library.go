package emu

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"

typedef int (*gt_emu_count_fn)(void);
typedef const char *(*gt_emu_name_fn)(int);
typedef unsigned long long (*gt_emu_launches_fn)(int);
typedef int (*gt_emu_launch_fn)(int, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void **, char *, int);
typedef void (*gt_emu_schedule_fn)(int, unsigned long long);

typedef struct {
	gt_dl_lib lib;
	gt_emu_count_fn count;
	gt_emu_name_fn name;
	gt_emu_launches_fn launches;
	gt_emu_launch_fn launch;
	gt_emu_schedule_fn schedule;
} gt_emu_lib;

static int gt_emu_open(gt_emu_lib *l, const char *path) {
	const char *names[1] = {path};
	if (gt_dl_open(&l->lib, names, 1, RTLD_NOW | RTLD_LOCAL) != 0) {
		return -1;
	}
	l->count = (gt_emu_count_fn)gt_dl_sym(&l->lib, "gt_emu_kernel_count");
	l->name = (gt_emu_name_fn)gt_dl_sym(&l->lib, "gt_emu_kernel_name");
	l->launches = (gt_emu_launches_fn)gt_dl_sym(&l->lib, "gt_emu_launches");
	l->launch = (gt_emu_launch_fn)gt_dl_sym(&l->lib, "gt_emu_launch");
	l->schedule = (gt_emu_schedule_fn)gt_dl_sym(&l->lib, "gt_emu_set_schedule");
	return l->count && l->name && l->launches && l->launch && l->schedule ? 0 : -1;
}
static void gt_emu_schedule_call(gt_emu_lib *l, int mode, unsigned long long seed) { l->schedule(mode, seed); }
static int gt_emu_count_call(gt_emu_lib *l) { return l->count(); }
static const char *gt_emu_name_call(gt_emu_lib *l, int i) { return l->name(i); }
static unsigned long long gt_emu_launches_call(gt_emu_lib *l, int i) { return l->launches(i); }

// gt_emu_launch_call builds the parameter array from a packed argument
// block and per-argument offsets, then launches.
static int gt_emu_launch_call(gt_emu_lib *l, int id, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, char *block, size_t *offs, int nargs, char *err, int errlen) {
	void *params[64];
	for (int i = 0; i < nargs && i < 64; i++) {
		params[i] = block + offs[i];
	}
	return l->launch(id, gx, gy, gz, bx, by, bz, params, err, errlen);
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Library is an opened emulation library.
type Library struct {
	l     *C.gt_emu_lib
	names []string
	ids   map[string]int
}

// Open loads the library at path (built by Build).
func Open(path string) (*Library, error) {
	l := (*C.gt_emu_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_emu_lib{}))))
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if C.gt_emu_open(l, cs) != 0 {
		msg := C.GoString(&l.lib.err[0])
		C.free(unsafe.Pointer(l))
		return nil, fmt.Errorf("emu: open %s: %s", path, msg)
	}
	lib := &Library{l: l, ids: make(map[string]int)}
	n := int(C.gt_emu_count_call(l))
	for i := 0; i < n; i++ {
		name := C.GoString(C.gt_emu_name_call(l, C.int(i)))
		lib.names = append(lib.names, name)
		lib.ids[name] = i
	}
	return lib, nil
}

// Names lists the library's kernels in table order.
func (l *Library) Names() []string { return append([]string(nil), l.names...) }

// Launches is how many times kernel name has been launched in this
// process (through the mock driver or Launch); -1 if the library has no
// such kernel.
func (l *Library) Launches(name string) int64 {
	id, ok := l.ids[name]
	if !ok {
		return -1
	}
	return int64(C.gt_emu_launches_call(l.l, C.int(id)))
}

// Schedule is the order in which emulated blocks, and the threads of a
// block between two barriers, run. A GPU guarantees neither order, so a
// correct kernel gives the same bits under every schedule.
type Schedule int

const (
	Forward Schedule = iota // index order (the default)
	Reverse                 // reversed index order
	Shuffle                 // a seeded pseudo-random permutation, drawn afresh for every pass
	// Interleave is Shuffle that also lets other threads run at every
	// global-memory access of the prelude (gt_load, gt_store).
	Interleave
)

// SetSchedule sets the schedule of launches made on the calling OS thread
// from now on (the mock driver launches on the device's thread: call it
// inside cuda.Device.Do). seed matters for Shuffle only.
func (l *Library) SetSchedule(s Schedule, seed uint64) {
	C.gt_emu_schedule_call(l.l, C.int(s), C.ulonglong(seed))
}

// Dim is a grid or block shape; zero components count as 1.
type Dim struct{ X, Y, Z uint32 }

func (d Dim) norm() Dim {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Launch runs kernel name over grid × block on the calling OS thread and
// returns when it has finished. Arguments follow the kernel's parameters:
// *Mem for pointers, and int32, uint32, int64, uint64, float32, float64.
func (l *Library) Launch(name string, grid, block Dim, args ...any) error {
	id, ok := l.ids[name]
	if !ok {
		return fmt.Errorf("emu: no kernel %s in the library", name)
	}
	if len(args) > 64 {
		return fmt.Errorf("emu: %s: %d arguments, at most 64", name, len(args))
	}
	var packed []byte
	offs := make([]C.size_t, len(args))
	for i, a := range args {
		offs[i] = C.size_t(len(packed))
		var v [8]byte
		switch x := a.(type) {
		case *Mem:
			binary.LittleEndian.PutUint64(v[:], uint64(uintptr(x.p)))
			packed = append(packed, v[:8]...)
		case int32:
			binary.LittleEndian.PutUint32(v[:], uint32(x))
			packed = append(packed, v[:8]...)
		case uint32:
			binary.LittleEndian.PutUint32(v[:], x)
			packed = append(packed, v[:8]...)
		case int64:
			binary.LittleEndian.PutUint64(v[:], uint64(x))
			packed = append(packed, v[:8]...)
		case uint64:
			binary.LittleEndian.PutUint64(v[:], x)
			packed = append(packed, v[:8]...)
		case float32:
			binary.LittleEndian.PutUint32(v[:], math.Float32bits(x))
			packed = append(packed, v[:8]...)
		case float64:
			binary.LittleEndian.PutUint64(v[:], math.Float64bits(x))
			packed = append(packed, v[:8]...)
		default:
			return fmt.Errorf("emu: %s: argument %d has unsupported type %T", name, i, a)
		}
	}
	// The packed block and offsets live in C memory for the call: the
	// kernel reads its arguments through pointers into them.
	cblock := C.malloc(C.size_t(len(packed) + 8))
	defer C.free(cblock)
	if len(packed) > 0 {
		copy(unsafe.Slice((*byte)(cblock), len(packed)), packed)
	}
	coffs := (*C.size_t)(C.malloc(C.size_t(8 * (len(offs) + 1))))
	defer C.free(unsafe.Pointer(coffs))
	copy(unsafe.Slice(coffs, len(offs)), offs)
	var errbuf [1024]C.char
	g, b := grid.norm(), block.norm()
	if C.gt_emu_launch_call(l.l, C.int(id), C.uint(g.X), C.uint(g.Y), C.uint(g.Z), C.uint(b.X), C.uint(b.Y), C.uint(b.Z),
		(*C.char)(cblock), coffs, C.int(len(args)), &errbuf[0], C.int(len(errbuf))) != 0 {
		return fmt.Errorf("%s", C.GoString(&errbuf[0]))
	}
	return nil
}

// Mem is zeroed C memory a directly launched kernel can address.
type Mem struct {
	p unsafe.Pointer
	n int
}

// Alloc returns n zeroed bytes of C memory; Free releases them.
func Alloc(n int) *Mem {
	return &Mem{p: C.calloc(C.size_t(max(n, 1)), 1), n: n}
}

// Bytes views the memory; the view is invalid after Free.
func (m *Mem) Bytes() []byte { return unsafe.Slice((*byte)(m.p), m.n) }

// Float32s views the memory as float32s.
func (m *Mem) Float32s() []float32 { return unsafe.Slice((*float32)(m.p), m.n/4) }

// Int32s views the memory as int32s.
func (m *Mem) Int32s() []int32 { return unsafe.Slice((*int32)(m.p), m.n/4) }

// Float64s views the memory as float64s.
func (m *Mem) Float64s() []float64 { return unsafe.Slice((*float64)(m.p), m.n/8) }

// Free releases the memory.
func (m *Mem) Free() {
	if m.p != nil {
		C.free(m.p)
		m.p = nil
	}
}
