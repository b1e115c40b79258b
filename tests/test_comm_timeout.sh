#!/bin/sh
# A frozen MPI rank (suite mpi): with QPORT_COMM_TIMEOUT=2 the
# live rank's collective fails naming the frozen one and the job ends --
# it used to spin at 100% CPU forever. Skips (77) without mpirun.
set -u
P="$1"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
MPI="mpirun -n 2 --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none"
out=$(QPORT_COMM_TIMEOUT=2 timeout 90 $MPI "$P" 2>&1); rc=$?
echo "$out" | tail -20
[ $rc -ne 124 ] && [ $rc -ne 137 ] || { echo "FAIL: mpirun did not end (exit $rc)"; exit 1; }
[ $rc -ne 0 ] || { echo "FAIL: the job must fail"; exit 1; }
echo "$out" | grep -q "FAIL" && { echo "FAIL: a check failed"; exit 1; }
echo "$out" | grep -q "rank 0: .*rank 1 did not answer" || { echo "FAIL: rank 0 must name rank 1"; exit 1; }
out=$(QPORT_COMM_TIMEOUT=soon timeout 60 $MPI "$P" 2>&1); rc=$?
echo "$out" | grep -q "QPORT_COMM_TIMEOUT.*invalid value 'soon'" || { echo "$out"; echo "FAIL: a bad QPORT_COMM_TIMEOUT"; exit 1; }
echo "ok: a frozen rank is named after QPORT_COMM_TIMEOUT and the job ends"
