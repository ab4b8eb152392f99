package main

import (
	"strconv"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"5GB": 5_000_000_000, "500MB": 500_000_000, "2GiB": 2 << 30, "8KB": 8000,
		"123": 123, "10 kib": 10 << 10, "1TB": 1e12, "48GiB": 48 << 30, "48G": 48 << 30, "80GB": 80e9,
		"1.5TiB": 3 << 39, "512 MiB": 512 << 20, "1kb": 1000, "1.5GB": 1_500_000_000,
		"9223372036854775807": 9223372036854775807, "+000000000000001": 1, "+2GiB": 2 << 30} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GB", "0", "-5GB", "5XB", "9223372036854775807GB", "5GB5", "GiB", "-1GiB",
		"48GiBs", "1e400", "0.0000001K", ".", "1..5G", "++1", "+", "+-1"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseByteSize: any size string is an error or a positive size, never
// a panic or an overflow; a plain number of bytes reads as itself, and a
// size written back in bytes reads as itself.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"5GB", "2GiB", "123", "", "9223372036854775807", "1e9", "5 GB", "٣GB", "48GiB", "1.5T", "9e99", "0.0000001K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err == nil && n < 1 {
			t.Fatalf("parseByteSize(%q) = %d with no error", s, n)
		}
		if v, perr := strconv.ParseInt(s, 10, 64); perr == nil && v > 0 && (err != nil || n != v) {
			t.Fatalf("parseByteSize(%q) = %d, %v; want %d", s, n, err, v)
		}
		if err == nil {
			if m, err := parseByteSize(strconv.FormatInt(n, 10)); err != nil || m != n {
				t.Fatalf("%q → %d → %d, %v", s, n, m, err)
			}
		}
	})
}
