package cuda

import "time"

// Each method below is the Ctx call of the same name run in one Device.Do.

func do1[T any](d *Device, f func(c *Ctx) (T, error)) (T, error) {
	var v T
	err := d.Do(func(c *Ctx) error {
		var err error
		v, err = f(c)
		return err
	})
	return v, err
}

// Alloc allocates bytes of device memory.
func (d *Device) Alloc(bytes int) (DevicePtr, error) {
	return do1(d, func(c *Ctx) (DevicePtr, error) { return c.Alloc(bytes) })
}

// Free frees memory from Alloc.
func (d *Device) Free(p DevicePtr) error { return d.Do(func(c *Ctx) error { return c.Free(p) }) }

// MemInfo is the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.Do(func(c *Ctx) error {
		var e error
		free, total, e = c.MemInfo()
		return e
	})
	return free, total, err
}

// AllocHost allocates pinned host memory.
func (d *Device) AllocHost(bytes int) (HostBuffer, error) {
	return do1(d, func(c *Ctx) (HostBuffer, error) { return c.AllocHost(bytes) })
}

// FreeHost frees memory from AllocHost.
func (d *Device) FreeHost(h HostBuffer) error {
	return d.Do(func(c *Ctx) error { return c.FreeHost(h) })
}

// CopyHtoD copies src to dst synchronously.
func (d *Device) CopyHtoD(dst DevicePtr, src []byte) error {
	return d.Do(func(c *Ctx) error { return c.CopyHtoD(dst, src) })
}

// CopyDtoH copies len(dst) bytes from src synchronously.
func (d *Device) CopyDtoH(dst []byte, src DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.CopyDtoH(dst, src) })
}

// CopyDtoD copies bytes between device buffers.
func (d *Device) CopyDtoD(dst, src DevicePtr, bytes int) error {
	return d.Do(func(c *Ctx) error { return c.CopyDtoD(dst, src, bytes) })
}

// CopyHtoDAsync queues a copy from pinned memory on s.
func (d *Device) CopyHtoDAsync(dst DevicePtr, src HostBuffer, s Stream) error {
	return d.Do(func(c *Ctx) error { return c.CopyHtoDAsync(dst, src, s) })
}

// CopyDtoHAsync queues a copy into pinned memory on s.
func (d *Device) CopyDtoHAsync(dst HostBuffer, src DevicePtr, s Stream) error {
	return d.Do(func(c *Ctx) error { return c.CopyDtoHAsync(dst, src, s) })
}

// CopyDtoDAsync queues a device-to-device copy on s.
func (d *Device) CopyDtoDAsync(dst, src DevicePtr, bytes int, s Stream) error {
	return d.Do(func(c *Ctx) error { return c.CopyDtoDAsync(dst, src, bytes, s) })
}

// MemsetD8 sets n bytes at p to v.
func (d *Device) MemsetD8(p DevicePtr, v byte, n int) error {
	return d.Do(func(c *Ctx) error { return c.MemsetD8(p, v, n) })
}

// MemsetD32 sets n 32-bit words at p to v.
func (d *Device) MemsetD32(p DevicePtr, v uint32, n int) error {
	return d.Do(func(c *Ctx) error { return c.MemsetD32(p, v, n) })
}

// MemsetD8Async queues setting n bytes at p to v on s.
func (d *Device) MemsetD8Async(p DevicePtr, v byte, n int, s Stream) error {
	return d.Do(func(c *Ctx) error { return c.MemsetD8Async(p, v, n, s) })
}

// Synchronize waits for all work on the device.
func (d *Device) Synchronize() error { return d.Do(func(c *Ctx) error { return c.Synchronize() }) }

// NewStream creates a stream.
func (d *Device) NewStream(nonBlocking bool) (Stream, error) {
	return do1(d, func(c *Ctx) (Stream, error) { return c.NewStream(nonBlocking) })
}

// DestroyStream destroys s.
func (d *Device) DestroyStream(s Stream) error {
	return d.Do(func(c *Ctx) error { return c.DestroyStream(s) })
}

// StreamSynchronize waits for the work queued on s.
func (d *Device) StreamSynchronize(s Stream) error {
	return d.Do(func(c *Ctx) error { return c.StreamSynchronize(s) })
}

// SyncIfQueued waits for s only if work was queued on it since the last
// wait (Ctx.SyncIfQueued).
func (d *Device) SyncIfQueued(s Stream) (bool, error) {
	return do1(d, func(c *Ctx) (bool, error) { return c.SyncIfQueued(s) })
}

// StreamQuery reports whether the work queued on s is done, without
// waiting for it.
func (d *Device) StreamQuery(s Stream) (bool, error) {
	return do1(d, func(c *Ctx) (bool, error) { return c.StreamQuery(s) })
}

// StreamWaitEvent makes later work on s wait for e.
func (d *Device) StreamWaitEvent(s Stream, e Event) error {
	return d.Do(func(c *Ctx) error { return c.StreamWaitEvent(s, e) })
}

// NewEvent creates an event.
func (d *Device) NewEvent(timing bool) (Event, error) {
	return do1(d, func(c *Ctx) (Event, error) { return c.NewEvent(timing) })
}

// RecordEvent records e on s.
func (d *Device) RecordEvent(e Event, s Stream) error {
	return d.Do(func(c *Ctx) error { return c.RecordEvent(e, s) })
}

// EventSynchronize waits for e.
func (d *Device) EventSynchronize(e Event) error {
	return d.Do(func(c *Ctx) error { return c.EventSynchronize(e) })
}

// EventElapsed is the time between two completed timing events.
func (d *Device) EventElapsed(start, end Event) (time.Duration, error) {
	return do1(d, func(c *Ctx) (time.Duration, error) { return c.EventElapsed(start, end) })
}

// DestroyEvent destroys e.
func (d *Device) DestroyEvent(e Event) error {
	return d.Do(func(c *Ctx) error { return c.DestroyEvent(e) })
}

// LoadModule loads a CUBIN or PTX image.
func (d *Device) LoadModule(image []byte) (Module, error) {
	return do1(d, func(c *Ctx) (Module, error) { return c.LoadModule(image) })
}

// UnloadModule unloads m.
func (d *Device) UnloadModule(m Module) error {
	return d.Do(func(c *Ctx) error { return c.UnloadModule(m) })
}

// Function looks up a kernel of m.
func (d *Device) Function(m Module, name string) (Function, error) {
	return do1(d, func(c *Ctx) (Function, error) { return c.Function(m, name) })
}

// SetMaxDynamicSharedMemory raises f's dynamic shared memory limit.
func (d *Device) SetMaxDynamicSharedMemory(f Function, bytes int) error {
	return d.Do(func(c *Ctx) error { return c.SetMaxDynamicSharedMemory(f, bytes) })
}

// Launch queues f with args (see Ctx.Launch).
func (d *Device) Launch(f Function, cfg LaunchConfig, args ...any) error {
	return d.Do(func(c *Ctx) error { return c.Launch(f, cfg, args...) })
}

// LaunchDeferred is Launch through Enqueue: no handoff of its own, and a
// failure reported to sink. args must not change after the call.
func (d *Device) LaunchDeferred(sink func(error), f Function, cfg LaunchConfig, args ...any) {
	d.Enqueue(func(c *Ctx) error { return c.Launch(f, cfg, args...) }, sink)
}
