// Package nccl owns gotrain's use of NCCL (libnccl.so.2), loaded at run
// time with dlopen so the binary builds and runs without it: the version,
// unique ids, communicator init, finalize, destroy and abort, asynchronous
// errors, AllReduce, ReduceScatter, AllGather, Broadcast, Send/Recv and
// group calls.
//
// # Versions
//
// NCCL only ever appended calls and enum values, so every symbol newer than
// 2.3.5 is optional: a call the loaded library lacks returns an error
// wrapping ErrUnsupported that names the release that added it. bfloat16
// and the Avg reduction need 2.10.3 and are refused before the call on an
// older library, which would otherwise fail with an opaque
// ncclInvalidArgument.
//
// # Threads
//
// Each rank's communicator belongs to one GPU and must be created and used
// with that device's primary context current: call these methods inside
// cuda.Device.Do. ncclCommInitRank waits for every rank, so the ranks of
// one process must call it from different goroutines (each inside its own
// device's Do). NCCL's group state is per OS thread: Group locks the
// calling goroutine to its thread for the group's duration.
//
// Library is immutable and safe for concurrent use. A Comm is used by one
// goroutine at a time, except Abort, which may be called from any
// goroutine, also while another call on the Comm is blocked.
//
// # Memory and streams
//
// Buffers are cuda.DevicePtr device addresses. Collectives are enqueued on
// the given stream and complete asynchronously, as in NCCL: synchronise the
// stream before reading a result.
//
// The package needs cgo.
package nccl
