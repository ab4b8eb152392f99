package metrics

import "testing"

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB",
		45 << 20: "45.0 MiB", 5 << 30: "5.00 GiB", -2048: "-2.0 KiB", 200 << 30: "200.0 GiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
