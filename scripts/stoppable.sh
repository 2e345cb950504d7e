# stoppable.sh — sourced by the launch scripts (run_gpt2_124M.sh, run_multinode.sh).
#
# run_stoppable COMMAND...: runs COMMAND (mpirun) in the background and waits for it, turning a
# SIGTERM or SIGINT sent to the script into SIGUSR1 for COMMAND. Open MPI's mpirun forwards
# SIGUSR1 to every rank, which then finishes its step, writes a checkpoint and exits 75
# (docs/distributed.md); a SIGTERM it forwards itself is followed by a kill about 2 s later, too
# soon for a large checkpoint. The script exits with COMMAND's status.
run_stoppable() {
    "$@" &
    local pid=$! rc=0 again
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
