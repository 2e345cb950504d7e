# stoppable.sh — sourced by the launch scripts (run_gpt2_124M.sh, run_multinode.sh,
# slurm_train.sbatch).
#
# run_stoppable COMMAND...: runs COMMAND (mpirun, srun) in the background and waits for it, turning
# a SIGTERM or SIGINT sent to the script into SIGUSR1 for COMMAND. Open MPI's mpirun and Slurm's
# srun forward SIGUSR1 to every rank, which then finishes its step, writes a checkpoint and exits 75
# (docs/distributed.md); a SIGTERM or SIGINT mpirun gets itself makes it forward SIGTERM and kill
# the ranks about 2 s later, too soon for a large checkpoint, and srun kills them at once. So COMMAND runs in a process group of its
# own (job control, set -m): a Ctrl-C in the terminal, or a signal to the script's whole group,
# reaches the script only. Its stdin is /dev/null (a background group reading the terminal would be
# stopped). The script exits with COMMAND's status.
run_stoppable() {
    set -m
    "$@" </dev/null &
    local pid=$! rc=0 again
    set +m
    trap 'kill -USR1 "$pid" 2>/dev/null' TERM INT
    while :; do
        wait "$pid" && rc=0 || rc=$?
        if (( rc > 128 )) && kill -0 "$pid" 2>/dev/null; then continue; fi   # a trapped signal woke the wait
        if (( rc > 128 )); then                                              # it exited meanwhile: its status
            wait "$pid" && again=0 || again=$?
            (( again == 127 )) || rc=$again
        fi
        break
    done
    trap - TERM INT
    return "$rc"
}
