// Package optim owns the optimizer-side arithmetic of a training step, as
// DeepSpeed defines it: the AdamW hyperparameters and which tensors decay
// (the update itself is backend.Backend.AdamW), DeepSpeed's learning-rate
// schedulers, global-norm gradient clipping and the fp16 dynamic loss scaler.
//
// Everything here is host-side float64 scalar math on a handful of numbers
// per step; nothing touches a Buffer. The trainer maps its config onto the
// typed parameter structs (this package does not read DeepSpeed JSON; package
// config holds its defaults).
//
// One optimizer step k (k = 1, 2, …) of a trainer looks like:
//
//	scale := scaler.Scale()                  // the scale the loss was multiplied by
//	skipped, err := scaler.Update(overflow)  // stop the run on err
//	if !skipped {
//		p := adam.Scheduled(sched).Params(k)   // lr (and OneCycle betas) for step k
//		p.GradScale = float32(optim.ClipCoef(norm, clip) / scale)
//		if !optim.Decays(shape) {
//			p.WeightDecay = 0
//		}
//		backend.AdamW(param, master, grad, m, v, p) // per tensor or partition
//		sched.Step()                           // never on a skipped step
//	}
//
// where k counts successful updates (it drives the bias correction) and norm is
// the global L2 norm of the gradients divided by the scale. Without fp16
// there is no scaler: the scale is 1 and no step is skipped.
//
// Types here are plain values or single-owner state machines: none is safe
// for concurrent use, and none needs to be (one trainer goroutine steps them).
package optim
