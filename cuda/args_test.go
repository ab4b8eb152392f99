package cuda

import (
	"encoding/binary"
	"math"
	"testing"
)

// Arguments sit at offsets aligned to their size, as in a C struct, so the
// driver reads each from where its pointer says.
func TestPackArgsLayout(t *testing.T) {
	block, offs, err := packArgs([]any{int8(-3), DevicePtr(0x1122334455667788), float32(1.5), int16(-2), float64(-0.25), uint8(7), int64(-9), uint32(5)})
	if err != nil {
		t.Fatal(err)
	}
	wantOffs := []uint64{0, 8, 16, 20, 24, 32, 40, 48}
	if len(offs) != len(wantOffs) {
		t.Fatalf("offsets %v, want %v", offs, wantOffs)
	}
	for i := range offs {
		if offs[i] != wantOffs[i] {
			t.Fatalf("offsets %v, want %v", offs, wantOffs)
		}
	}
	if len(block) != 52 {
		t.Errorf("block is %d bytes, want 52", len(block))
	}
	ne := binary.NativeEndian
	if int8(block[0]) != -3 || ne.Uint64(block[8:]) != 0x1122334455667788 ||
		math.Float32frombits(ne.Uint32(block[16:])) != 1.5 || int16(ne.Uint16(block[20:])) != -2 ||
		math.Float64frombits(ne.Uint64(block[24:])) != -0.25 || block[32] != 7 ||
		int64(ne.Uint64(block[40:])) != -9 || ne.Uint32(block[48:]) != 5 {
		t.Errorf("values wrong in block % x", block)
	}
	if _, _, err := packArgs([]any{uint(1)}); err == nil {
		t.Errorf("uint accepted")
	}
	if b, o, err := packArgs(nil); err != nil || len(b) != 0 || len(o) != 0 {
		t.Errorf("no arguments: %v %v %v", b, o, err)
	}
}
