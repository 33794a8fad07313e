#!/usr/bin/env bash
# make bench: the collectives' speed goals, measured in one run on this
# machine with 2 ranks, as ratios against references run in the same session
# (README "Performance"):
#   - the Go MPI backend vs the same MPI called from C
#     (trainer/bench/reference/mpi_bench.c), for Open MPI and for MPICH;
#   - the pure-Go TCP backend vs PyTorch's gloo
#     (trainer/bench/reference/gloo_bench.py, Debian's python3-torch).
# The programs run interleaved, ROUNDS times; each size keeps its best run
# (bench --best), which sets most of a shared machine's noise aside.
# Writes $OUT/*.jsonl, $OUT/summary.txt (the comparison tables) and
# $OUT/busbw.png (bus bandwidth against size, one line per program).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
ROUNDS=${ROUNDS:-3}
MAX_BYTES=${MAX_BYTES:-64MiB}
NP=2
BK=bin/batchkit
PYTHON=${PYTHON:-/usr/bin/python3}

for tool in mpicc.openmpi mpicc.mpich mpirun.openmpi mpirun.mpich "$PYTHON"; do
	command -v "$tool" >/dev/null || { echo "bench: $tool not found (make test installs everything)" >&2; exit 2; }
done
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
	{ echo "bench: $PYTHON has no torch.distributed with gloo (apt-get install python3-torch)" >&2; exit 2; }

make -s build
make -s build-mpi MPI=openmpi
make -s build-mpi MPI=mpich
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl
mpicc.openmpi -O2 -o "$OUT/mpi_bench_openmpi" trainer/bench/reference/mpi_bench.c
mpicc.mpich -O2 -o "$OUT/mpi_bench_mpich" trainer/bench/reference/mpi_bench.c

ompi=(mpirun.openmpi --oversubscribe -n "$NP")
[ "$(id -u)" = 0 ] && ompi+=(--allow-run-as-root)
mpich=(mpirun.mpich -n "$NP")
sweep=(--max-bytes "$MAX_BYTES")

for round in $(seq "$ROUNDS"); do
	echo "bench: round $round of $ROUNDS" >&2
	"${ompi[@]}" "$OUT/mpi_bench_openmpi" "${sweep[@]}" >>"$OUT/c-openmpi.jsonl"
	"${ompi[@]}" bin/batchkit-openmpi bench --backend mpi --format json "${sweep[@]}" >>"$OUT/go-openmpi.jsonl"
	"${mpich[@]}" "$OUT/mpi_bench_mpich" "${sweep[@]}" >>"$OUT/c-mpich.jsonl"
	"${mpich[@]}" bin/batchkit-mpich bench --backend mpi --format json "${sweep[@]}" >>"$OUT/go-mpich.jsonl"
	"$BK" run -n "$NP" -- "$BK" bench --backend tcp --format json "${sweep[@]}" >>"$OUT/go-tcp.jsonl"
	"$BK" run -n "$NP" -- "$PYTHON" trainer/bench/reference/gloo_bench.py "${sweep[@]}" >>"$OUT/gloo.jsonl"
done

{
	echo "# Go MPI backend (Open MPI) against C on Open MPI"
	"$BK" bench --best --baseline "$OUT/c-openmpi.jsonl" "$OUT/go-openmpi.jsonl"
	echo
	echo "# Go MPI backend (MPICH) against C on MPICH"
	"$BK" bench --best --baseline "$OUT/c-mpich.jsonl" "$OUT/go-mpich.jsonl"
	echo
	echo "# TCP backend against PyTorch gloo"
	"$BK" bench --best --baseline "$OUT/gloo.jsonl" "$OUT/go-tcp.jsonl"
} | tee "$OUT/summary.txt"
"$BK" bench --best --plot "$OUT/busbw.png" "$OUT"/c-openmpi.jsonl "$OUT"/go-openmpi.jsonl \
	"$OUT"/c-mpich.jsonl "$OUT"/go-mpich.jsonl "$OUT"/go-tcp.jsonl "$OUT"/gloo.jsonl
echo "bench: wrote $OUT/summary.txt and $OUT/busbw.png" >&2
