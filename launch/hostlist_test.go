package launch

import (
	"reflect"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"gpu5", []string{"gpu5"}},
		{"node[01-03,07],gpu5", []string{"node01", "node02", "node03", "node07", "gpu5"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"ip-10-1-[5,7]-1", []string{"ip-10-1-5-1", "ip-10-1-7-1"}},
		{"x[3],y[1-1]", []string{"x3", "y1"}},
	}
	for _, tc := range tests {
		got, err := ExpandHostlist(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "n[1-3", "n1-3]", "n[]", "n[3-1]", "n[a-b]", "n[1-[2]]", "n[0-99999999]",
		// Each range is allowed, but together they would be billions of names.
		"a[0-65535]b[0-65535]", "a[0-65535,0-65535,0-65535]", "x[" + strings.Repeat("0-9999,", 20) + "1]"} {
		if got, err := ExpandHostlist(bad); err == nil {
			t.Errorf("%q: expanded to %v, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "hostlist") {
			t.Errorf("%q: error %q does not say hostlist", bad, err)
		}
	}
}

func TestExpandTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"4", []int{4}},
		{"4(x2)", []int{4, 4}},
		{"4(x2),3", []int{4, 4, 3}},
		{"2,1(x3)", []int{2, 1, 1, 1}},
	}
	for _, tc := range tests {
		got, err := ExpandTasksPerNode(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "4(2)", "4(x)", "0", "4(x0)", "4(x2", "-1"} {
		if got, err := ExpandTasksPerNode(bad); err == nil {
			t.Errorf("%q: got %v, want an error", bad, got)
		}
	}
}
