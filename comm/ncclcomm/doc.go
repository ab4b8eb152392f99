// Package ncclcomm owns gotrain's GPU collectives: a comm.Comm over NCCL
// for one GPU per rank, whose communicator is set up through the
// rendezvous Store (rank 0 makes the NCCL unique id and publishes it).
//
// # Buffers
//
// Every Buffer must be device memory of the rank's GPU (Pool Device, a
// device pointer in Mem().Dev): NCCL moves device memory only, so a host
// Buffer is a caller bug and panics, as do the zero Buffer and lengths or
// dtypes that disagree between arguments. F32, BF16, F16 and I32 buffers
// reduce in NCCL (Sum, Avg for floats, Max); U16 buffers move (AllGather,
// Broadcast) but do not reduce.
//
// Numerics are NCCL's, which differ from comm/tcp's in the last bits:
// NCCL rounds 16-bit partial sums to the buffer's dtype at each step of
// its ring instead of once, and its Avg (ncclAvg, which needs NCCL 2.10.3,
// as bf16 does: New refuses an older library) multiplies each input by
// 1/Size before summing; for a power-of-two Size that scaling is exact.
// Max keeps NCCL's NaN handling, which need not propagate a NaN. Results
// are still deterministic and identical on every rank for a given world.
//
// # Streams and ordering
//
// The Comm owns a stream on the device. Before each collective it records
// an event on Options.ComputeStream and makes its own stream wait for it,
// so a collective sees every kernel queued on the compute stream before
// the call. After the collective it records a completion event on its own
// stream and makes the compute stream wait for that, so compute queued
// after the call sees the result by the device's own ordering. The call
// returns once the event fired: one cuEventSynchronize on the device's
// waiter thread (cuda.Device.AwaitEvent), never a poll, and never on the
// device thread, which stays free: the ZeRO engine issues collectives from
// its own goroutine while the backward pass keeps queueing kernels, which
// is what overlap_comm overlaps. Host buffers are staged through pinned
// memory with async copies on the Comm's stream (staging.go). An error
// NCCL saw asynchronously (ncclCommGetAsyncError) fails the next call.
//
// # Failures
//
// A call is bounded by its context's deadline, else by Options.Timeout
// (comm.DefaultTimeout unless set). A call that runs out of time returns a
// *comm.TimeoutError and aborts the NCCL communicator (ncclCommAbort),
// which releases the peers blocked on it; Abort does the same with its
// reason; a context cancelled mid-call aborts too. The aborting rank first
// writes its rank and reason to the Store, so a peer whose call then fails
// in NCCL returns a *comm.AbortedError naming that rank and reason. An
// NCCL error with no published reason (a peer process died) is reported
// as an abort by this rank that wraps NCCL's error. After any failure
// every later call returns a *comm.AbortedError with the same cause.
//
// NCCL cannot abort a communicator that is still forming: New bounds its
// waits on the Store by its deadline, but once every rank passed the
// Store's barrier, a rank that dies before ncclCommInitRank leaves the
// others' device threads waiting in NCCL after New returned its timeout.
//
// # Concurrency
//
// Collectives are issued from one goroutine at a time; Abort, Stats, Rank
// and Size are safe from any goroutine. Every NCCL call but the abort runs
// on the device's thread (cuda.Device.Do).
//
// The package needs cgo through the cuda and nccl packages.
package ncclcomm
