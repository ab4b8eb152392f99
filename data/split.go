package data

import "math"

// valSplit decides which documents go to the validation split.
//
// The rule: with F rounded to millionths as f, document i (0-based, in
// document order) goes to val when i ≥ 1 and ⌈i·f⌉ > ⌈(i−1)·f⌉, i.e. each
// time the running total i·F crosses an integer. So document 0 always goes to
// train, document 1 to val whenever F > 0, and then one document in every 1/F
// (for F = 0.1: documents 1, 11, 21, …). Of n documents, ⌈(n−1)·F⌉ go to
// val: at least one when F > 0 and n ≥ 2, none when n = 1. The rule needs no
// document count, so documents stream, and integer arithmetic keeps it exact.
type valSplit struct {
	f int64 // F in millionths
}

const valSplitScale = 1_000_000

func newValSplit(fraction float64) valSplit {
	f := int64(math.Round(fraction * valSplitScale))
	if fraction > 0 && f == 0 {
		f = 1
	}
	return valSplit{f: f}
}

func (v valSplit) isVal(i int64) bool {
	if i < 1 || v.f == 0 {
		return false
	}
	return ceilDiv(i*v.f, valSplitScale) > ceilDiv((i-1)*v.f, valSplitScale)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
