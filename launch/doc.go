// Package launch owns starting and supervising the processes of a
// data-parallel job:
//
//   - DeepSpeed hostfiles (hostfile.go) and DeepSpeed's --include/--exclude
//     resource filters, --num_nodes and --nproc (include.go), giving an
//     ordered list of nodes and slots; RANK is assigned in node order, then
//     slot order (placement.go); without a hostfile, this machine's GPUs or
//     CPU rank slots (localpool.go);
//   - recognising a rank that some other launcher started (gotrain launch,
//     torchrun-style env, srun, Open MPI, MPICH/Intel MPI) from its
//     environment alone (env.go, with Slurm's compressed hostlists in
//     hostlist.go);
//   - running one node's ranks as child processes of the same binary
//     (local.go) under a supervisor (supervise.go) that stops every rank when
//     one fails or the launcher is interrupted, and leaves no process behind;
//   - the command lines of the multi-node launchers: one ssh per node running
//     gotrain launch there (ssh.go), srun (srun.go), run under the same
//     supervisor (remote.go), and sbatch scripts (sbatch.go).
//
// Everything that builds a command line or reads an environment is a pure
// function of its inputs, so it is tested without ssh, Slurm or MPI; process
// execution sits behind the Runner interface.
package launch
