// Package zero owns ZeRO data parallelism for gotrain: the partition
// arithmetic, the stage 0–3 engines (which rank holds which parameters,
// gradients, master weights and AdamW moments, and when they are
// all-reduced, reduce-scattered or all-gathered), the gradient reduction
// windows, stage 3's gather, prefetch and release of parameters, and the
// placement of offloaded state in host memory.
//
// # Partitions
//
// The unit of partitioning is a parameter group (for the model's decoders:
// the embeddings, each block, the final norm and head). With N ranks, group g of n_g elements is
// padded to n_g' = ceil(n_g/N)·N and cut into N chunks of c_g = n_g'/N:
// rank r owns group-relative elements [r·c_g, (r+1)·c_g). The padding
// (elements n_g..n_g'-1, zero, in the last chunks) exists only in padded and
// partition buffers. A rank's partition is its chunks of every group in
// group order, so every partition has the same length P = Σ c_g, and a
// group's gradient reduction is exactly one ReduceScatter of n_g' elements
// and its parameter gather exactly one AllGather of equal chunks. Example:
// N = 4 and groups of 10, 1 and 8 elements give chunks 3, 1 and 2
// (P = 6); rank 3 owns element 9 of the first group plus two padding
// elements, and only padding of the second. See Plan.
//
// # What each rank holds (Ψ parameters, P the partition length)
//
//   - Stage 0: parameters and gradients whole, unpadded (Params, Grads);
//     AdamW moments whole (Optimizer, 8Ψ bytes); a whole fp32 master only for
//     16-bit parameters. Step all-reduces the gradients (Sum) in place in
//     buckets of at most ReduceBucketSize elements, and every rank runs
//     AdamW on everything (identical results, since the Comm's reductions
//     are bit-identical on every rank).
//   - Stage 1: parameters and gradients whole in a padded flat buffer
//     (each group at its PaddedOff, so a group's padded range is directly
//     the source of its reduce-scatter and the destination of its
//     all-gather). Gradients accumulate locally over micro-batches; Step
//     reduce-scatters each group into the rank's gradient partition
//     (Grads, P elements). The fp32 master partition (Master, 4P bytes)
//     and the moments (Optimizer, 8P bytes) make the 12Ψ/N of the ZeRO
//     paper.
//   - Stage 2: as stage 1 but the gradients exist only as the partition
//     (Grads, P elements): AcquireGrads hands out a zeroed group-sized window
//     (Comm category, DeepSpeed's ipg bucket) and GradsReady
//     reduce-scatters it and adds the rank's chunk into the partition,
//     accumulating over micro-batches.
//   - Stage 3: as stage 2 but the parameters exist only as the partition
//     (Params, P elements), except groups of at most PersistenceThreshold elements,
//     kept whole (padded) on every rank; their gradients and optimizer
//     state are partitioned all the same. AcquireParams gathers a group
//     into a window (Params category, so the gathered layers show next to
//     the partition) that ReleaseParams frees or keeps for reuse.
//
// The AdamW update runs per tensor ∩ owned range (merged where adjacent
// tensors share the decay setting) on the master, writing the rounded
// result into the parameters: stage 3 into its partition, stages 1–2 into
// one of two staging chunks (Comm) that are all-gathered into the full
// parameters group by group while AdamW goes on with the next group. The
// Comm's in-place forms are not relied on: sources and destinations of a
// collective never overlap.
//
// Reductions use Sum: the model's backward is run with dloss =
// 1/(B·T·gas·world), so the sum over ranks is the global-batch mean
// gradient. Every collective covers one group (or one stage-0 bucket);
// AllgatherBucketSize has nothing to split.
//
// # Loss scaling
//
// With fp16 the trainer multiplies dloss by its loss scale S and passes S
// as StepInput.LossScale, so the reduced gradients carry S. Step reports
// the norm of the reduced gradients divided by S, clips by it, and has
// AdamW multiply the gradients by min(1, ClipNorm/(norm+1e-6))/S, which is
// DeepSpeed's division by the combined scale
// S·max(1, (norm+1e-6)/ClipNorm). A NaN or an infinity in the reduced
// gradients (an overflow) makes the norm non-finite on every rank alike:
// Step skips the update, clears the gradients and returns
// ErrNonFiniteGradients, and the scaler lowers S. A power-of-two S scales
// every rounding exactly, so the step equals the unscaled one bit for bit.
//
// # Offload
//
// OffloadOptimizer (stages 1–3) puts the master partition and the moments
// (Master, Optimizer) in the Host pool, or HostPinned with
// OffloadOptimizerPinned; the device holds none. Step works group by
// group: the rank's reduced gradient chunk is copied out into a one-chunk
// F32 buffer in that pool (Comm category; per group chunk rather than a
// whole partition, so the extra host memory is one chunk), AdamW runs
// there, and the updated parameters, rounded to ParamDType, go into a
// one-chunk buffer beside it and are copied back, into the staging chunk
// that is all-gathered (stages 1–2) or into the stage-3 partition. The
// backend's AdamW serves as the host optimizer: every pool of the CPU
// backend is host memory; a GPU backend would run a host AdamW over the
// pinned buffers at that point (DeepSpeed's CPU Adam). The same
// operations run on the same values, so the results are those of the run
// without offload, bit for bit.
//
// OffloadParam (stage 3) puts the parameter partition (Params) in the Host
// or HostPinned pool. Every all-gather of a chunk (for the model, a
// prefetch, a persistent group after the step, HostParams) first copies it,
// on the comm goroutine, into a one-chunk device buffer (Comm) and gathers
// from there, so the device's Params bytes are the gathered windows and
// the persistent groups, nothing more. The step's AdamW writes the
// partition on the host directly when the optimizer is offloaded too, and
// otherwise writes a one-chunk device buffer (Comm) that is copied to the
// host.
//
// # Stage 3 order, prefetch and reuse
//
// The model acquires groups in a fixed order (model.ParamStore): forward
// 0, 1, …, G−1; backward 0, G−1, G−2, …, 1. When group g is acquired, the
// engine queues the gathers of the non-persistent groups that follow g in
// that order, stopping at the first that would take the elements gathered
// ahead of use past PrefetchBucketSize or the live gathered elements past
// MaxLiveParameters. A group already gathered is reused (its acquisitions
// are counted). When its last acquisition is released, a window stays
// gathered if the group's next use — the rest of this pass, then the next
// pass, backward after forward and forward after backward — comes within
// fewer than MaxReuseDistance gathered elements (the embeddings, which
// start every pass, and the last blocks of a forward pass, which start the
// backward); otherwise it is freed. A gather that needs room under
// MaxLiveParameters evicts such retained windows, the one needed farthest
// ahead first (a prefetch only those needed later than itself). Step frees
// every window, since the parameters change under them.
//
// # Checkpoints
//
// ExportState hands each rank's owned ranges of the fp32 master and the
// AdamW moments to a writer in the model's flat layout (stage 0: rank 0
// writes everything), one chunk at a time. RestoreState reads back the
// ranges the engine's own world size and stage assign, so a checkpoint
// reshards onto any world and stage; the parameters every rank holds whole
// are read whole, rather than gathered, and rounded to ParamDType.
//
// # Concurrency
//
// One goroutine per engine issues every collective, in the order the
// engine queued them; the queue depends only on the sequence of calls, so
// ranks making the same calls issue the same collectives. Stage 2–3
// reductions with OverlapComm and stage 3 prefetches run there while the
// caller goes on, so the backend sees work from both goroutines at once on
// disjoint buffers (the CPU backend allows it; a GPU backend must put the
// comm goroutine's work on a stream of its own). The first failure of a
// collective is sticky and returned by the next engine call; a wait cut
// short by its context aborts the Comm, so no rank is left waiting for
// collectives this one will never issue.
package zero
