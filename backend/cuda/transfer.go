package cuda

import (
	"fmt"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels"
)

func f32Bytes(w []float32) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
}

// hostView is the host memory under a host-pool buffer.
func hostView(x backend.Buffer) []byte {
	m := x.Mem()
	return m.Host[x.ByteOff() : x.ByteOff()+x.Bytes()]
}

func devPtr(x backend.Buffer) cu.DevicePtr { return cu.DevicePtr(x.Mem().Dev).Add(x.ByteOff()) }

// Upload implements backend.Backend: src fills the first len(src) bytes
// of dst, after every op queued before the call. Up to maxStagedBytes go
// through pinned staging by an async copy on the stream (the caller may
// reuse src at once, and nothing waits: a batch's inputs and targets cost
// no synchronisation); larger uploads wait for the stream and copy.
func (b *Backend) Upload(dst backend.Buffer, src []byte) error {
	if dst.IsNil() {
		return fmt.Errorf("cuda upload: zero Buffer")
	}
	if len(src) > dst.Bytes() {
		return fmt.Errorf("cuda upload to %s: %d bytes for %d", dst, len(src), dst.Bytes())
	}
	if dst.Mem().Freed {
		return fmt.Errorf("cuda upload to %s: buffer was freed", dst)
	}
	if isHost(dst.Pool()) {
		copy(hostView(dst), src)
		return nil
	}
	if len(src) == 0 {
		return nil
	}
	if len(src) <= maxStagedBytes {
		slot, err := b.stage.take(b, len(src))
		if err != nil {
			return fmt.Errorf("cuda upload: %w", err)
		}
		copy(slot.buf.Bytes(), src)
		if err := b.dev.CopyHtoDAsync(devPtr(dst), slot.buf.Slice(0, len(src)), b.stream); err != nil {
			b.released(slot)
			return fmt.Errorf("cuda upload %d bytes: %w", len(src), err)
		}
		b.issued(slot)
		return nil
	}
	if err := b.dev.StreamSynchronize(b.stream); err != nil {
		return fmt.Errorf("cuda upload: %w", err)
	}
	if err := b.copyHtoD(devPtr(dst), src); err != nil {
		return fmt.Errorf("cuda upload %d bytes: %w", len(src), err)
	}
	return nil
}

// Download implements backend.Backend: src's bytes fill the start of dst.
func (b *Backend) Download(dst []byte, src backend.Buffer) error {
	if src.IsNil() {
		return fmt.Errorf("cuda download: zero Buffer")
	}
	if len(dst) < src.Bytes() {
		return fmt.Errorf("cuda download from %s: %d bytes of room for %d", src, len(dst), src.Bytes())
	}
	if src.Mem().Freed {
		return fmt.Errorf("cuda download from %s: buffer was freed", src)
	}
	dst = dst[:src.Bytes()]
	if isHost(src.Pool()) {
		copy(dst, hostView(src))
		return nil
	}
	if len(dst) == 0 {
		return nil
	}
	if err := b.readDevice(dst, devPtr(src)); err != nil {
		return fmt.Errorf("cuda download %d bytes: %w", len(dst), err)
	}
	return nil
}

// Copy implements backend.Backend. Between host and device the bytes
// move synchronously; a cast happens on the device (host data is first
// staged in device scratch in its own dtype).
func (b *Backend) Copy(dst, src backend.Buffer) {
	if dst.Len() != src.Len() {
		panic("cuda: Copy: length mismatch")
	}
	if dst.DType() != src.DType() && (!dst.DType().IsFloat() || !src.DType().IsFloat()) {
		panic("cuda: Copy: cast between non-float dtypes")
	}
	n := dst.Len()
	if n == 0 {
		return
	}
	dh, sh := isHost(dst.Pool()), isHost(src.Pool())
	same := dst.DType() == src.DType()
	switch {
	case dh && sh:
		b.host.Copy(dst, src)
	case !dh && !sh && same:
		b.check("copy", b.dev.CopyDtoDAsync(b.t("copy", dst).Ptr, b.t("copy", src).Ptr, dst.Bytes(), b.stream))
	case !dh && !sh:
		b.check("copy", b.k.Cast(b.stream, b.t("copy", dst), b.t("copy", src), n))
	case !dh: // host → device
		if same {
			b.check("copy", b.Upload(dst, hostView(src)))
			return
		}
		tmp, release, ok := b.scratch(kernels.DType(src.DType()), n)
		if !ok {
			return
		}
		defer release()
		b.check("copy", b.dev.StreamSynchronize(b.stream))
		b.check("copy", b.copyHtoD(tmp.Ptr, hostView(src)))
		b.check("copy", b.k.Cast(b.stream, b.t("copy", dst), tmp, n))
	default: // device → host
		if same {
			b.check("copy", b.Download(hostView(dst), src))
			return
		}
		tmp, release, ok := b.scratch(kernels.DType(dst.DType()), n)
		if !ok {
			return
		}
		defer release()
		b.check("copy", b.k.Cast(b.stream, tmp, b.t("copy", src), n))
		b.check("copy", b.readDevice(hostView(dst), tmp.Ptr))
	}
}

// Zero implements backend.Backend.
func (b *Backend) Zero(dst backend.Buffer) {
	if dst.Len() == 0 {
		return
	}
	if isHost(dst.Pool()) {
		b.host.Zero(dst)
		return
	}
	b.check("zero", b.dev.MemsetD8Async(b.t("zero", dst).Ptr, 0, dst.Bytes(), b.stream))
}
