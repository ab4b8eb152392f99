// Package cuda owns gotrain's use of the CUDA driver API (libcuda.so.1),
// loaded at run time with dlopen so the binary builds and runs without it:
// driver init and version, devices and their attributes, each device's
// primary context, device and pinned host memory, copies and memset,
// streams, events and timing, module load and kernel launch.
//
// # Threads and contexts
//
// A CUDA context is current per OS thread, while goroutines move between
// threads. So each open Device owns one goroutine locked to its OS thread
// (runtime.LockOSThread) on which the device's primary context is made
// current once, and every driver call that needs the context runs there:
// Device.Do sends a function to that goroutine and waits for it. Inside the
// function, the *Ctx argument offers the driver calls; it must not escape
// the function, and Do must not be called from inside Do (the device thread
// would wait for itself). The primary context is used, not cuCtxCreate,
// because cuBLAS and NCCL run on the runtime API, which shares it; other
// packages run their own library calls inside Do for the same reason.
//
// Device's own methods (Alloc, CopyHtoD, Launch, ...) are each one Do call
// and may be used from any goroutine; a sequence of calls is cheaper as one
// Do. Driver is immutable after Load and safe for concurrent use.
//
// # Memory and handles
//
// Device addresses are DevicePtr (an integer, never dereferenced by Go);
// streams, events, modules and functions are driver handles kept as
// integers, converted back to pointers only in C (csrc/gt_cuda.h). Host
// memory read or written after a call returns (async copies) must be
// pinned memory from AllocHost, never Go memory, per cgo's pointer rules;
// kernel arguments are copied into C memory for each launch.
//
// The package needs cgo.
package cuda
