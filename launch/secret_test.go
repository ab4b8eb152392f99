package launch

import (
	"bufio"
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestJobEnv(t *testing.T) {
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	a, b := JobEnv(nil), JobEnv([]string{"PATH=/bin", JobSecretEnv + "="})
	for _, env := range [][]string{a, b} {
		if len(env) != 2 || !hex64.MatchString(lookupEnv(env, JobSecretEnv)) || !hex16.MatchString(lookupEnv(env, JobIDEnv)) {
			t.Fatalf("JobEnv = %q, want a 64-hex-digit secret and a 16-hex-digit id", env)
		}
	}
	if lookupEnv(a, JobSecretEnv) == lookupEnv(b, JobSecretEnv) || lookupEnv(a, JobIDEnv) == lookupEnv(b, JobIDEnv) {
		t.Errorf("two jobs got the same secret or id: %q, %q", a, b)
	}
	mine := JobEnv([]string{JobSecretEnv + "=old", JobSecretEnv + "=users own", JobIDEnv + "=run-7"})
	if want := []string{JobSecretEnv + "=users own", JobIDEnv + "=run-7"}; !reflect.DeepEqual(mine, want) {
		t.Errorf("JobEnv kept %q, want the user's %q", mine, want)
	}
	if got := WithoutJobEnv([]string{"A=1", JobSecretEnv + "=x", "B=2", JobIDEnv + "=y"}); !reflect.DeepEqual(got, []string{"A=1", "B=2"}) {
		t.Errorf("WithoutJobEnv = %q", got)
	}
}

func TestStdinEnvRoundTrip(t *testing.T) {
	env := []string{JobIDEnv + "=abc", JobSecretEnv + "=with \"quotes\", spaces\nand a newline"}
	r := bufio.NewReader(strings.NewReader(EncodeStdinEnv(env) + "rest of the lifeline"))
	got, err := ReadStdinEnv(r)
	if err != nil || !reflect.DeepEqual(got, env) {
		t.Fatalf("ReadStdinEnv = %q, %v; want %q", got, err, env)
	}
	if rest, _ := r.ReadString(0); rest != "rest of the lifeline" {
		t.Errorf("ReadStdinEnv read past its line: %q is left", rest)
	}
	for name, in := range map[string]string{
		"closed early":     `{"GOTRAIN_JOB_SECRET":"x"`,
		"not json":         "GOTRAIN_JOB_SECRET=x\n",
		"other variable":   `{"GOTRAIN_JOB_SECRET":"x","LD_PRELOAD":"/tmp/evil.so"}` + "\n",
		"no secret":        `{"GOTRAIN_JOB_ID":"x"}` + "\n",
		"empty secret":     `{"GOTRAIN_JOB_SECRET":""}` + "\n",
		"NUL in the value": `{"GOTRAIN_JOB_SECRET":"a\u0000b"}` + "\n",
		"endless line":     `{"GOTRAIN_JOB_SECRET":"` + strings.Repeat("x", 2*maxStdinEnv),
	} {
		if _, err := ReadStdinEnv(bufio.NewReaderSize(strings.NewReader(in), 16)); err == nil || !strings.Contains(err.Error(), "job variables on stdin") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func TestSplitShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                    nil,
		"  -i key  -p 22 ":                    {"-i", "key", "-p", "22"},
		`-o 'ProxyCommand=ssh -W %h:%p gw'`:   {"-o", "ProxyCommand=ssh -W %h:%p gw"},
		`-i "/keys/my key" -o\ A=b`:           {"-i", "/keys/my key", "-o A=b"},
		`"a \"b\" \$c \\ \x"`:                 {`a "b" $c \ \x`},
		`'it'\''s'`:                           {"it's"},
		`''`:                                  {""},
		"a\\\nb c":                            {"ab", "c"},
		"a \\\n b":                            {"a", "b"},
		`$HOME ~ *`:                           {"$HOME", "~", "*"},
		"tab\tand\nnewline":                   {"tab", "and", "newline"},
		`--gpus-per-node=8 --mem="32G total"`: {"--gpus-per-node=8", "--mem=32G total"},
	} {
		got, err := SplitShellWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitShellWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`-o 'open`, `"open`, `a\`} {
		if _, err := SplitShellWords(bad); err == nil {
			t.Errorf("SplitShellWords(%q) accepted it", bad)
		}
	}
	// Whatever ShellJoin quotes splits back into the same words.
	words := []string{"", "plain", "a b", "it's", `"dq"`, "$HOME", "new\nline", "=x"}
	if got, err := SplitShellWords(ShellJoin(words)); err != nil || !reflect.DeepEqual(got, words) {
		t.Errorf("round trip = %q, %v; want %q", got, err, words)
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{"worker-0": "worker-0", "root@worker-0": "worker-0", "a@b@10.0.0.1": "10.0.0.1", "": ""} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSSHHint(t *testing.T) {
	for _, tc := range []struct {
		tail []string
		want []string
	}{
		{[]string{"Host key verification failed."}, []string{"ssh-keyscan -p 2222 w1 >> ~/.ssh/known_hosts", "StrictHostKeyChecking=accept-new", "BatchMode=yes"}},
		{[]string{"@@@@", "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @", "Host key verification failed."}, []string{"ssh-keygen -R w1"}},
		{[]string{"root@w1: Permission denied (publickey)."}, []string{"ssh-copy-id -p 2222 root@w1", "-i KEYFILE"}},
		{[]string{"ssh: Could not resolve hostname w1: Name or service not known"}, []string{"w1 does not resolve", "hostfile"}},
		{[]string{"ssh: connect to host w1 port 2222: Connection refused"}, []string{"no ssh server answers on w1", "--ssh_port"}},
	} {
		got := SSHHint("root@w1", 2222, tc.tail)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("SSHHint(%q) = %q, lacks %q", tc.tail, got, w)
			}
		}
	}
	if got := SSHHint("w1", 0, []string{"gotrain: comm: lost rank 1"}); got != "" {
		t.Errorf("a failure that is not ssh's got a hint: %q", got)
	}
	if got := SSHHint("w1", 0, []string{"Host key verification failed."}); !strings.Contains(got, "`ssh-keyscan w1 >>") {
		t.Errorf("without a port: %q", got)
	}
}

// fakeResolver resolves the names in its map.
type fakeResolver map[string][]string

func (f fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("lookup " + host + ": no such host")
}

func TestCheckMasterAddr(t *testing.T) {
	r := fakeResolver{"worker-0": {"10.0.0.1"}, "empty": {}}
	for _, ok := range []string{"worker-0", "10.0.0.1", "::1", "fe80::1%eth0", "127.0.0.2"} {
		if err := CheckMasterAddr(context.Background(), r, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for addr, want := range map[string]string{
		"":                     "MASTER_ADDR is empty",
		"root@worker-0":        `has a user name in it; give the host alone, "worker-0"`,
		"worker-0:29500":       "includes a port; set MASTER_ADDR=worker-0 and MASTER_PORT=29500",
		"[::1]":                "without brackets, ::1",
		"a:b:c":                "neither a host name nor an IP address",
		"worker 0":             "is not a host name",
		"w;rm -rf":             "is not a host name",
		"no-such-host.invalid": `MASTER_ADDR "no-such-host.invalid" does not resolve on this machine (lookup no-such-host.invalid: no such host); give --master_addr`,
		"empty":                "does not resolve on this machine (no addresses)",
	} {
		err := CheckMasterAddr(context.Background(), r, addr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckMasterAddr(%q) = %v, want an error containing %q", addr, err, want)
		}
	}
}
