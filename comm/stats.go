package comm

// OpStats accumulates one collective kind: how many calls, how many payload
// bytes and how many wall-clock seconds. Bytes counts each call's full
// message as DeepSpeed's comms logger does: the buffer for all-reduce and
// broadcast, the Size·n-element side (src of reduce-scatter, dst of
// all-gather) for the sharded ops, 0 for a barrier.
type OpStats struct {
	Calls   int64
	Bytes   int64
	Seconds float64
}

// Stats holds OpStats by Kind. The zero value is empty.
type Stats struct {
	ByKind [numKinds]OpStats
}

// Of returns the counters of one kind.
func (s Stats) Of(k Kind) OpStats { return s.ByKind[k] }

// Add records one finished call.
func (s *Stats) Add(k Kind, bytes int64, seconds float64) {
	o := &s.ByKind[k]
	o.Calls++
	o.Bytes += bytes
	o.Seconds += seconds
}

// BusFactor is the ratio of bus bandwidth to algorithm bandwidth
// (size/time) for a collective among n ranks, as DeepSpeed's comms logger
// and nccl-tests define it: 2(n−1)/n for all-reduce, (n−1)/n for all-gather
// and reduce-scatter, 1 for broadcast. It is what each rank's link carries
// per byte of message with a bandwidth-optimal algorithm.
func BusFactor(k Kind, n int) float64 {
	if n <= 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch k {
	case KindAllReduce:
		return 2 * f
	case KindAllGather, KindReduceScatter:
		return f
	case KindBroadcast:
		return 1
	}
	return 0
}
