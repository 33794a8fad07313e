#!/usr/bin/env bash
# The gradient allreduce overlapped with the backward pass (batchkit train
# --bucket-mb, issue 33 §3), measured where compute dominates (--hidden
# 1024,1024, batch 64, GOMAXPROCS=1 on every rank, as scripts/bench-train.sh):
#   - the scaling from 1 to 2 ranks, samples/s at 2 / (2 × at 1), with the
#     buckets (--bucket-mb $ON) and without (--bucket-mb 0, one allreduce
#     after the backward pass), on every backend built here (tcp, Open MPI,
#     MPICH, oneCCL when `make build-ccl` works);
#   - how much of the allreduce the overlap hides: rank 0's comm_s (the
#     calls' time) and comm_exposed_s (what the step waited for after its
#     backward pass) of the metrics lines, hidden = 1 − exposed / comm;
#   - an A/A: in every repetition the 1-rank run is repeated last, and the
#     order of the two 2-rank runs alternates; a control row, two
#     independent 1-rank runs at once, is what the machine gives 2 processes.
# Samples/s and comm times are those of epochs 2..E (the first warms up).
# BEFORE=REV (a git revision, e.g. main) also builds that revision's
# binaries (git archive into $OUT/overlap-before) and runs every backend
# with them too, in the same repetitions, as the row "BACKEND@before" (not
# the NAME~MIN,MAX rows: the sleeps are this revision's). A
# backend written NAME~MIN,MAX runs with BATCHKIT_IDLE_POLL=MIN,MAX (the
# sleeps of mpi's and ccl's bucket calls, µs): BACKENDS="mpich mpich~16,256".
# Every run records the 1-minute load average when it ended.
# Writes $OUT/overlap-runs.jsonl and $OUT/overlap-summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
REPS=${REPS:-5}
ON=${ON:-1}
EPOCHS=${EPOCHS:-3}
BACKENDS=${BACKENDS:-independent tcp openmpi mpich ccl}
BEFORE=${BEFORE:-}
PYTHON=${PYTHON:-/usr/bin/python3}
BIG=(--hidden 1024,1024 --batch-size 64 --epochs "$EPOCHS")

# build DIR: the binaries bin/batchkit{,-openmpi,-mpich,-ccl} in DIR.
build() {
	make -s -C "$1" build
	make -s -C "$1" build-mpi MPI=openmpi
	make -s -C "$1" build-mpi MPI=mpich
	if [[ " $BACKENDS " == *" ccl"* ]] && ! make -s -C "$1" build-ccl; then
		echo "bench-overlap: no oneCCL (make intel-stack): ccl left out" >&2
		BACKENDS=$(printf '%s\n' $BACKENDS | grep -v '^ccl' | tr '\n' ' ')
	fi
}
build .
if [ -n "$BEFORE" ]; then
	B=$OUT/overlap-before
	rm -rf "$B"
	mkdir -p "$B"
	git archive "$BEFORE" | tar -x -C "$B"
	build "$B"
	BACKENDS="$BACKENDS $(printf '%s\n' $BACKENDS | grep -v -e '^independent' -e '~' | sed 's/$/@before/' | tr '\n' ' ')"
fi
W=$OUT/overlap-work
rm -rf "$W"
mkdir -p "$W"
RUNS=$OUT/overlap-runs.jsonl
: >"$RUNS"
export PMIX_MCA_psec=${PMIX_MCA_psec:-native} GOMAXPROCS=1
ompi=(mpirun.openmpi --oversubscribe -x GOMAXPROCS)
[ "$(id -u)" = 0 ] && ompi+=(--allow-run-as-root)

# record BACKEND LABEL REP METRICS: one line of $RUNS.
record() {
	"$PYTHON" - "$@" >>"$RUNS" <<'EOF'
import json, sys
backend, label, rep, metrics = sys.argv[1:5]
load = float(open("/proc/loadavg").read().split()[0])
epochs = [json.loads(l) for l in open(metrics)]
later = epochs[1:]
secs = sum(1 / e["samples_per_second"] for e in later)
print(json.dumps({"backend": backend, "label": label, "rep": int(rep),
                  "samples_per_second": len(later) / secs, "steps": later[-1]["step"] - epochs[0]["step"],
                  "comm_s": sum(e.get("comm_s", 0) for e in later),
                  "comm_exposed_s": sum(e.get("comm_exposed_s", 0) for e in later), "load1": load}))
EOF
}

# launch BACKEND N FLAGS...: train on N ranks of BACKEND (NAME[~MIN,MAX][@before]).
launch() {
	local backend=$1 n=$2 i pids=() BK=bin/batchkit
	shift 2
	if [[ $backend == *@before ]]; then
		BK=$B/bin/batchkit
		backend=${backend%@before}
	fi
	if [[ $backend == *~* ]]; then
		export BATCHKIT_IDLE_POLL=${backend#*~}
		backend=${backend%%~*}
	else
		unset BATCHKIT_IDLE_POLL
	fi
	case $backend in
	independent) # N single-rank trainings at once, samples/s summed
		for i in $(seq "$n"); do
			"$BK" train "$@" --metrics "$M.$i" >/dev/null 2>&1 &
			pids+=($!)
		done
		for i in "${pids[@]}"; do wait "$i"; done
		"$PYTHON" -c '
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
runs = [[json.loads(l) for l in open("%s.%d" % (out, i + 1))] for i in range(n)]
with open(out, "w") as f:
    for ep in zip(*runs):
        f.write(json.dumps(dict(ep[0], samples_per_second=sum(e["samples_per_second"] for e in ep))) + "\n")
' "$M" "$n" ;;
	tcp) "$BK" run -n "$n" -- "$BK" train --backend tcp "$@" --metrics "$M" ;;
	openmpi) "${ompi[@]}" ${BATCHKIT_IDLE_POLL:+-x BATCHKIT_IDLE_POLL} -n "$n" "$BK-openmpi" train --backend mpi "$@" --metrics "$M" ;;
	mpich) mpirun.mpich -n "$n" "$BK-mpich" train --backend mpi "$@" --metrics "$M" ;;
	ccl) "$BK-ccl" run -n "$n" -- "$BK-ccl" train --backend ccl "$@" --metrics "$M" ;;
	esac
}

for rep in $(seq "$REPS"); do
	order="2-off 2-on"
	[ $((rep % 2)) = 0 ] && order="2-on 2-off"
	for backend in $BACKENDS; do
		echo "bench-overlap: repetition $rep of $REPS, $backend" >&2
		for label in 1 $order 1-aa; do
			[ "$backend" = independent ] && [ "$label" = 2-on ] && continue
			M=$W/$backend-$label-$rep.jsonl
			n=${label%%-*}
			mb=0
			[ "$label" = 2-on ] && mb=$ON
			launch "$backend" "$n" "${BIG[@]}" --bucket-mb "$mb" >"$W/$backend-$label-$rep.log" 2>&1 ||
				{ echo "bench-overlap: $backend $label failed:" >&2; tail -20 "$W/$backend-$label-$rep.log" >&2; exit 1; }
			record "$backend" "$label" "$rep" "$M"
		done
	done
done

"$PYTHON" - "$RUNS" "$REPS" "$ON" <<'EOF' | tee "$OUT/overlap-summary.txt"
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
reps, on = int(sys.argv[2]), sys.argv[3]
R = range(1, reps + 1)
def val(b, label, rep, key="samples_per_second"):
    return next(r[key] for r in runs if r["backend"] == b and r["label"] == label and r["rep"] == rep)
def spread(xs):
    return "%.3f [%.3f–%.3f]" % (statistics.median(xs), min(xs), max(xs))
backends = list(dict.fromkeys(r["backend"] for r in runs))
print("# scaling 1 -> 2 ranks (samples/s at 2 / (2 x at 1)), --hidden 1024,1024, batch 64, GOMAXPROCS=1;")
print("# median [min–max] over %d repetitions; buckets: --bucket-mb %s; hidden: 1 - exposed / comm (rank 0)" % (reps, on))
loads = [r["load1"] for r in runs if "load1" in r]
if loads:
    print("# load average (1 min) at the end of the runs: %s" % spread(loads))
ceiling = {r: val("independent", "2-off", r) / (2 * val("independent", "1", r)) for r in R} if "independent" in backends else {}
print("# with / ceiling: the scaling with overlap over the same repetition's 2-independent-runs scaling")
print("| backend | without overlap | with overlap | with / ceiling | with / without, per repetition | A/A (1 rank again) | comm, exposed per step without (ms) | comm, exposed per step with (ms) | hidden with | samples/s at 1, 2 off, 2 on |")
print("|---|---|---|---|---|---|---|---|---|---|")
for b in backends:
    aa = [val(b, "1-aa", r) / val(b, "1", r) for r in R]
    s1 = statistics.median(val(b, "1", r) for r in R)
    if b == "independent":
        eff = [val(b, "2-off", r) / (2 * val(b, "1", r)) for r in R]
        print("| 2 independent 1-rank runs (ceiling) | %s | — | — | — | %s | — | — | — | %.0f, %.0f |" % (
            spread(eff), spread(aa), s1, statistics.median(val(b, "2-off", r) for r in R)))
        continue
    cols = []
    for lab in ("2-off", "2-on"):
        cols.append(spread([val(b, lab, r) / (2 * val(b, "1", r)) for r in R]))
    def per_step(lab, key):
        return statistics.median(val(b, lab, r, key) / val(b, lab, r, "steps") for r in R)
    comm = {lab: (per_step(lab, "comm_s"), per_step(lab, "comm_exposed_s")) for lab in ("2-off", "2-on")}
    hidden = [1 - val(b, "2-on", r, "comm_exposed_s") / val(b, "2-on", r, "comm_s") for r in R if val(b, "2-on", r, "comm_s") > 0]
    ofceil = [val(b, "2-on", r) / (2 * val(b, "1", r)) / ceiling[r] for r in R] if ceiling else []
    pairs = ", ".join("%.2f" % (val(b, "2-on", r) / val(b, "2-off", r)) for r in R)
    print("| %s | %s | %s | %s | %s | %s | %.1f, %.1f | %.1f, %.1f | %s | %.0f, %.0f, %.0f |" % (
        b, cols[0], cols[1], spread(ofceil) if ofceil else "—", pairs, spread(aa),
        1e3 * comm["2-off"][0], 1e3 * comm["2-off"][1], 1e3 * comm["2-on"][0], 1e3 * comm["2-on"][1],
        spread(hidden) if hidden else "—", s1,
        statistics.median(val(b, "2-off", r) for r in R), statistics.median(val(b, "2-on", r) for r in R)))
EOF
