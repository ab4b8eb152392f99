package launch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Node
	}{
		{"deepspeed example", "worker-1 slots=4\nworker-2 slots=4\n",
			[]Node{{"worker-1", []int{0, 1, 2, 3}}, {"worker-2", []int{0, 1, 2, 3}}}},
		{"comments blank lines and spacing", "# cluster A\n\n  worker-1   slots=2  # fast node\n\t\nworker-2\tslots=1\n# end\n",
			[]Node{{"worker-1", []int{0, 1}}, {"worker-2", []int{0}}}},
		{"open mpi max_slots", "n1 slots=2 max_slots=8\n", []Node{{"n1", []int{0, 1}}}},
		{"no trailing newline, CRLF-free ip host", "10.0.0.5 slots=3", []Node{{"10.0.0.5", []int{0, 1, 2}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHostfile("hosts", strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string // every one must appear in the message
	}{
		{"duplicate host", "a slots=1\nb slots=2\na slots=3\n",
			[]string{"hostfile hosts line 3", "host a is already listed on line 1", "one line per host"}},
		{"missing slots", "a slots=1\nworker-0\n",
			[]string{"hostfile hosts line 2", `bad entry "worker-0"`, "`<host> slots=<n>`"}},
		{"misspelt slots", "worker-0 slot=4\n",
			[]string{"line 1", `bad entry "worker-0 slot=4"`, "expected slots=<n>"}},
		{"non-numeric slots", "\n# c\nworker-0 slots=four\n",
			[]string{"line 3", `bad entry "worker-0 slots=four"`, "slots=four"}},
		{"negative slots", "worker-0 slots=-1\n", []string{"line 1", "bad entry"}},
		{"trailing junk", "worker-0 slots=4 gpus=4\n", []string{"line 1", `unexpected "gpus=4"`}},
		{"slots first", "slots=4 worker-0\n", []string{"line 1", "where a host name belongs"}},
		{"zero slots", "a slots=2\nb slots=0\n", []string{"hostfile hosts line 2", "host b has slots=0", "at least one slot or delete the line"}},
		// One process per slot: a typo must not allocate 10^11 of them.
		{"absurd slots", "a slots=100000000000\n", []string{"hostfile hosts line 1", "host a has slots=100000000000", "at most 4096"}},
		{"line too long", "a slots=1 #" + strings.Repeat("x", 1<<17) + "\n", []string{"hostfile hosts", "longer than"}},
		{"empty", "", []string{"hostfile hosts has no host entries", "worker-0 slots=8"}},
		{"only comments", "# nothing\n\n   # here\n", []string{"has no host entries"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHostfile("hosts", strings.NewReader(tc.text))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestReadHostfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(path, []byte("w0 slots=2\nw1 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := ReadHostfile(path)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("ReadHostfile = %v, %v", nodes, err)
	}
	if _, err := ReadHostfile(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "read hostfile") {
		t.Fatalf("missing file: %v", err)
	}
}
