package nccl

import "testing"

// ncclVersionCode is NCCL's NCCL_VERSION(X, Y, Z) macro from nccl.h:
// X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
func ncclVersionCode(x, y, z int) int {
	if x <= 2 && y <= 8 {
		return x*1000 + y*100 + z
	}
	return x*10000 + y*100 + z
}

func TestDecodeVersion(t *testing.T) {
	for y := 0; y <= 30; y++ {
		for z := 0; z <= 12; z++ {
			want := Version{2, y, z}
			if got := DecodeVersion(ncclVersionCode(2, y, z)); got != want {
				t.Errorf("DecodeVersion(%d) = %v, want %v", ncclVersionCode(2, y, z), got, want)
			}
		}
	}
	// The examples the NCCL header and release notes give.
	for code, want := range map[int]string{2708: "2.7.8", 21903: "2.19.3", 21003: "2.10.3", 23007: "2.30.7"} {
		if got := DecodeVersion(code).String(); got != want {
			t.Errorf("DecodeVersion(%d) = %s, want %s", code, got, want)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	cases := []struct {
		v       Version
		x, y, z int
		want    bool
	}{
		{Version{2, 10, 3}, 2, 10, 3, true},
		{Version{2, 10, 2}, 2, 10, 3, false},
		{Version{2, 9, 9}, 2, 10, 3, false},
		{Version{2, 11, 0}, 2, 10, 3, true},
		{Version{3, 0, 0}, 2, 10, 3, true},
		{Version{1, 99, 99}, 2, 0, 0, false},
	}
	for _, c := range cases {
		if got := c.v.AtLeast(c.x, c.y, c.z); got != c.want {
			t.Errorf("%v.AtLeast(%d, %d, %d) = %v", c.v, c.x, c.y, c.z, got)
		}
	}
}
