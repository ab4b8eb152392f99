package main

import (
	"strconv"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"5GB": 5_000_000_000, "500MB": 500_000_000, "2GiB": 2 << 30, "8KB": 8000,
		"123": 123, "10 kib": 10 << 10, "1TB": 1e12} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GB", "0", "-5GB", "5XB", "1.5GB", "9223372036854775807GB", "5GB5"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseByteSize: any --max-shard-size string is an error or a
// positive size, never a panic or an overflow, and a plain number of
// bytes reads as itself.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"5GB", "2GiB", "123", "", "9223372036854775807", "1e9", "5 GB", "٣GB"} {
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
	})
}
