package launch

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// The ssh launcher starts one ssh per node, and each runs gotrain launch on
// its node for that node's ranks (--world_info, --node_rank), instead of one
// ssh per rank: the per-node launcher puts its ranks in process groups with a
// parent-death signal and stops them when one fails, which an ssh session
// per rank could not do on the remote side.
//
// The session's stdin carries what must not be on a command line and the
// stop request. Its first line is the job's secret and id
// (--stdin-job-env, EncodeStdinEnv); after that the node launcher watches
// it (--stdin-lifeline): when stdin ends, because the local launcher is
// stopping the job (it closes stdin first and gives the nodes the grace
// period before it ends ssh) or because it died, the node's ranks get
// SIGTERM and save.

// SSHJob is what BuildSSHCommands needs.
type SSHJob struct {
	Nodes        []Node // the selection, in rank order
	RemoteBinary string // gotrain's path on the nodes
	Dir          string // working directory on the nodes (the launcher's, on a shared file system)
	// Env is KEY=VALUE exported on every node before gotrain starts
	// (ForwardedEnv and the env files). It is on the command line, so it
	// must not hold the job's secret (see WithoutJobEnv).
	Env []string
	// JobEnv is GOTRAIN_JOB_SECRET and GOTRAIN_JOB_ID (JobEnv), sent to
	// every node launcher through its stdin.
	JobEnv     []string
	Args       []string // the gotrain subcommand and its flags
	MasterAddr string
	MasterPort int
	// GracePeriod and LogDir are passed on to the node launchers.
	GracePeriod time.Duration
	LogDir      string
	SSHPort     int      // 0: ssh's default
	SSHArgs     []string // extra ssh options, before the host
	// NodeFlags are more launch flags for the node launchers
	// (--bind_cores_to_rank, --enable_each_rank_log DIR).
	NodeFlags []string
}

// Command is one process a multi-node launcher runs locally.
type Command struct {
	Label string   // "node 1 (worker-1)"
	Argv  []string // argv[0] is the program
	Ranks []int    // the global ranks it runs; nil when unknown (srun)
	// Stdin is written to the command's stdin first (the job's secret).
	Stdin string
	// StopByStdin: the command is asked to stop by closing its stdin
	// rather than by SIGTERM (an ssh session whose node launcher watches
	// its stdin).
	StopByStdin bool
	// Hint explains a failure from the command's last lines of output.
	Hint func(tail []string) string
}

// BuildSSHCommands returns one ssh command line per node. Each runs
//
//	cd DIR && export K=V ... && exec BINARY launch --launcher local
//	  --world_info W --node_rank K --master_addr A --master_port P
//	  --grace-period G [--log-dir D] --stdin-job-env --stdin-lifeline ARGS...
//
// as a single shell-quoted string, with BatchMode so a missing ssh key is an
// error instead of a password prompt nobody answers. The job's secret is
// the command's Stdin, never part of Argv.
func BuildSSHCommands(j SSHJob) ([]Command, error) {
	if len(j.Nodes) == 0 {
		return nil, fmt.Errorf("ssh launcher: no nodes selected")
	}
	if j.RemoteBinary == "" || j.Dir == "" {
		return nil, fmt.Errorf("ssh launcher: the remote binary and working directory must be set")
	}
	if len(j.Args) == 0 {
		return nil, fmt.Errorf("ssh launcher: no gotrain subcommand to run")
	}
	if j.MasterAddr == "" || j.MasterPort < 1 || j.MasterPort > 65535 {
		return nil, fmt.Errorf("ssh launcher: master address %q port %d: need a host and a TCP port 1-65535", j.MasterAddr, j.MasterPort)
	}
	for _, kv := range j.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) {
			return nil, fmt.Errorf("ssh launcher: %q is not KEY=VALUE with a valid variable name", kv)
		}
		if isJobEnv(k) {
			return nil, fmt.Errorf("ssh launcher: %s would be on the ssh command line, which every user sees in ps; it goes through stdin (SSHJob.JobEnv)", k)
		}
	}
	if lookupEnv(j.JobEnv, JobSecretEnv) == "" {
		return nil, fmt.Errorf("ssh launcher: no %s for the ranks", JobSecretEnv)
	}
	grace := j.GracePeriod
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	world := EncodeWorldInfo(j.Nodes)
	ranks := make([][]int, len(j.Nodes))
	for _, p := range Place(j.Nodes) {
		ranks[p.NodeRank] = append(ranks[p.NodeRank], p.Rank)
	}
	stdin := EncodeStdinEnv(j.JobEnv)
	if len(stdin) > maxStdinEnv {
		return nil, fmt.Errorf("ssh launcher: %s and %s take %d bytes; keep them under %d (64 hex digits are plenty)", JobSecretEnv, JobIDEnv, len(stdin), maxStdinEnv)
	}

	cmds := make([]Command, 0, len(j.Nodes))
	for k, n := range j.Nodes {
		remote := []string{j.RemoteBinary, "launch", "--launcher", "local",
			"--world_info", world, "--node_rank", strconv.Itoa(k),
			"--master_addr", j.MasterAddr, "--master_port", strconv.Itoa(j.MasterPort),
			"--grace-period", grace.String()}
		if j.LogDir != "" {
			remote = append(remote, "--log-dir", j.LogDir)
		}
		remote = append(remote, j.NodeFlags...)
		remote = append(remote, "--stdin-job-env", "--stdin-lifeline")
		remote = append(remote, j.Args...)

		script := "cd " + ShellQuote(j.Dir) + " && "
		if len(j.Env) > 0 {
			script += "export " + ShellJoin(j.Env) + " && "
		}
		script += "exec " + ShellJoin(remote)

		argv := []string{"ssh", "-o", "BatchMode=yes"}
		if j.SSHPort != 0 {
			argv = append(argv, "-p", strconv.Itoa(j.SSHPort))
		}
		argv = append(argv, j.SSHArgs...)
		argv = append(argv, n.Host, script)
		host, port := n.Host, j.SSHPort
		cmds = append(cmds, Command{Label: fmt.Sprintf("node %d (%s)", k, n.Host), Argv: argv, Ranks: ranks[k],
			Stdin: stdin, StopByStdin: true, Hint: func(tail []string) string { return SSHHint(host, port, tail) }})
	}
	return cmds, nil
}

// HostOf is the host part of an ssh destination: "root@worker-0" is
// worker-0. ssh takes the user from a hostfile's user@ prefix, but the
// ranks cannot rendezvous at "root@worker-0".
func HostOf(dest string) string {
	if i := strings.LastIndexByte(dest, '@'); i >= 0 {
		return dest[i+1:]
	}
	return dest
}

// SSHHint explains what ssh's last lines of output (tail) say went wrong
// with dest, or returns "". ssh runs with BatchMode=yes, so it cannot ask
// about an unknown host key or a password; the hint says what to do
// instead.
func SSHHint(dest string, port int, tail []string) string {
	text := strings.Join(tail, "\n")
	host := HostOf(dest)
	portArg := ""
	if port != 0 {
		portArg = fmt.Sprintf("-p %d ", port)
	}
	switch {
	case strings.Contains(text, "REMOTE HOST IDENTIFICATION HAS CHANGED"):
		return fmt.Sprintf("hint: the host key of %s differs from the one in known_hosts; if the machine was reinstalled, remove the old key with `ssh-keygen -R %s` and add the new one (see ssh-keyscan)", host, host)
	case strings.Contains(text, "Host key verification failed"):
		return fmt.Sprintf("hint: ssh does not know the host key of %s and cannot ask (gotrain runs it with BatchMode=yes); "+
			"check the key's fingerprint and add it with `ssh-keyscan %s%s >> ~/.ssh/known_hosts`, "+
			"or let ssh record unknown keys on first use with --launcher_args '-o StrictHostKeyChecking=accept-new'", host, portArg, host)
	case strings.Contains(text, "Permission denied"):
		return fmt.Sprintf("hint: ssh could not log in to %s without a password (BatchMode=yes); install a key with `ssh-copy-id %s%s` or name one with --launcher_args '-i KEYFILE'", host, portArg, dest)
	case strings.Contains(text, "Could not resolve hostname"):
		return fmt.Sprintf("hint: %s does not resolve on this machine; fix its name in the hostfile", host)
	case strings.Contains(text, "Connection refused"), strings.Contains(text, "Connection timed out"):
		return fmt.Sprintf("hint: no ssh server answers on %s; check that sshd runs there and listens on the port ssh uses (--ssh_port, or -p in --launcher_args)", host)
	}
	return ""
}

// EncodeWorldInfo encodes the selection for --world_info: URL-safe base64
// of JSON, as DeepSpeed passes its resource map to node launchers, so it
// needs no shell quoting.
func EncodeWorldInfo(nodes []Node) string {
	b, err := json.Marshal(nodes)
	if err != nil {
		panic("launch: marshal of []Node failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeWorldInfo reverses EncodeWorldInfo and checks the result.
func DecodeWorldInfo(s string) ([]Node, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("--world_info: not URL-safe base64: %w", err)
	}
	var nodes []Node
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("--world_info: %w", err)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("--world_info lists no nodes")
	}
	for _, n := range nodes {
		if n.Host == "" || len(n.Slots) == 0 {
			return nil, fmt.Errorf("--world_info: node %q has no host name or no slots", n.Host)
		}
	}
	return nodes, nil
}

// ForwardedEnv picks the KEY=VALUE entries of environ (os.Environ()) that
// are exported on the other nodes: names starting with NCCL or UCX (network
// tuning), GOTRAIN, OMP_ (threads) or OPENBLAS (core type).
// CUDA_VISIBLE_DEVICES is not among them: every node launcher sets it to its
// own slots, as DeepSpeed does. Neither are GOTRAIN_JOB_SECRET and
// GOTRAIN_JOB_ID, which travel through stdin.
func ForwardedEnv(environ []string) []string {
	prefixes := [...]string{"NCCL", "UCX", "GOTRAIN", "OMP_", "OPENBLAS"}
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) || isJobEnv(k) {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// Env files hold KEY=VAL lines exported on every node, like DeepSpeed's
// .deepspeed_env, which gotrain reads too.
const (
	DeepSpeedEnvFile = ".deepspeed_env"
	GotrainEnvFile   = ".gotrain_env"
)

// EnvFilePaths lists the env files to read, home directory first so that the
// working directory's files win: ~/.deepspeed_env, ~/.gotrain_env,
// ./.deepspeed_env, ./.gotrain_env.
func EnvFilePaths(home, cwd string) []string {
	dirs := []string{home}
	if cwd != home {
		dirs = append(dirs, cwd)
	}
	var out []string
	for _, dir := range dirs {
		if dir != "" {
			out = append(out, filepath.Join(dir, DeepSpeedEnvFile), filepath.Join(dir, GotrainEnvFile))
		}
	}
	return out
}

// validEnvName reports whether k is a shell variable name.
func validEnvName(k string) bool {
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return k != ""
}

// ReadEnvFiles reads KEY=VAL lines from the files that exist among paths;
// blank lines, '#' comments and a leading "export " are allowed, and values
// are taken literally (no quote removal, as in DeepSpeed). A later file's
// value for a key replaces an earlier one.
func ReadEnvFiles(paths []string) ([]string, error) {
	var env []string
	for _, path := range paths {
		f, _, err := regularfile.Open("launcher env file", path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var vars []string
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			text = strings.TrimPrefix(text, "export ")
			k, _, ok := strings.Cut(text, "=")
			if !ok || !validEnvName(k) {
				f.Close()
				return nil, fmt.Errorf("env file %s line %d: %q is not KEY=VALUE; write e.g. NCCL_DEBUG=INFO", path, line, sc.Text())
			}
			vars = append(vars, text)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read env file %s: %w", path, err)
		}
		env = MergeEnv(env, vars)
	}
	return env, nil
}
