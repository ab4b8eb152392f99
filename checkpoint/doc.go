// Package checkpoint owns gotrain's training checkpoints on disk: the layout
// (<output>/checkpoints/global_step<N>/ plus a "latest" file naming the tag,
// as DeepSpeed users expect), the atomic save, the load, resharding onto a
// different world size or ZeRO stage, integrity checks and export to a
// Hugging Face model.
//
// A tag holds one safetensors file per state kind (fp32 master params,
// AdamW's exp_avg and exp_avg_sq), each holding every parameter under its
// Hugging Face name in the model's flat layout (model.Layout: matrices
// (out, in), the head with Vp rows), F32, in layout order with no gaps. Flat element i of a kind
// is therefore at one computable byte offset, so:
//   - every rank computes every header from the model.Layout alone and
//     pwrites only the flat range it owns (no rank ever holds the full
//     optimizer state, no file is per rank);
//   - a resume with any world size or stage reads whichever ranges it owns.
//
// meta.json carries the training position (step, samples, tokens), the
// configs, scheduler and loss-scaler state, per-rank data positions, the RNG
// seed, a CRC-32C (Castagnoli) per tensor per file, the run id of the
// lineage that wrote it and the run's resolved settings, and begins with
// the SHA-256 of itself, so an edited or damaged meta.json is refused.
//
// A save is written under ".<tag>.tmp", fsynced, renamed to <tag> (swapped
// in with RENAME_EXCHANGE when the tag exists), and only then is "latest"
// replaced (write, fsync, rename). A crash at any point leaves the previous
// tag and "latest" as they were. A save that fails removes its
// ".<tag>.tmp" (Abort, Finish), and a run that takes the output lock
// removes those killed saves left (SweepPartial), so a full disk does not
// stay full of partial tags. Retention (Prune) deletes only the saving
// lineage's older tags. LockOutputDir keeps a second run out of a run's
// output directory.
package checkpoint
