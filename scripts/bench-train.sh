#!/usr/bin/env bash
# make bench-train: batchkit train against PyTorch DDP (Debian's python3-torch,
# gloo, CPU; trainer/bench/reference/torch_train.py), measured side by side in
# one run on this machine and reported as ratios with their spread over REPS
# alternating repetitions (docs/reference/collectives.md "Performance", method in docs/performance.md):
#   - time to 95 % test accuracy at world size 2, each launched the way its
#     users launch it (torchrun --nproc_per_node 2; batchkit run -n 2):
#     (a) the whole launch, start to exit, (b) the training loop alone (the
#     metrics' elapsed of the first epoch at 95 %: from just before the first
#     step to that epoch's evaluation). Each program runs exactly the epochs
#     it needs, found by one calibration run of 20 epochs;
#   - peak resident memory (VmHWM, /usr/bin/time's %M) of every rank of the
#     same run;
#   - samples/s where compute dominates (--hidden 1024,1024, batch 64): one
#     rank against torch with one thread, and the scaling from 1 to 2 ranks
#     (samples/s at 2 / (2 × at 1)) on the TCP and both MPI backends.
#     GOMAXPROCS=1 on every rank: gonum's Sgemm runs blocks on GOMAXPROCS
#     goroutines, so a rank would otherwise use both of a 2-core machine's
#     cores and the 1-rank figure would not be one core's. A control beside
#     them: two independent 1-rank runs at once, no communication at all,
#     the most 2 processes get out of this machine at that moment.
# Every comparison has an A/A control: the reference runs before and after
# the program in each repetition (the order of the two reference labels
# swapping every repetition), and the second reference run is compared with
# the first, as is batchkit's own second run; for the scaling, the 1-rank run
# is repeated after the 2-rank one.
# Writes $OUT/train-runs.jsonl (one line per run) and $OUT/train-summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
REPS=${REPS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
TORCHRUN=${TORCHRUN:-torchrun}
TARGET=0.95
BIG=(--hidden 1024,1024 --batch-size 64 --epochs 3)
BK=bin/batchkit
REF=trainer/bench/reference/torch_train.py

for tool in "$PYTHON" "$TORCHRUN" mpirun.openmpi mpirun.mpich /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bench-train: $tool not found (make test installs everything; /usr/bin/time: apt-get install time)" >&2; exit 2; }
done
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
	{ echo "bench-train: $PYTHON has no torch.distributed with gloo (apt-get install python3-torch)" >&2; exit 2; }

make -s build
make -s build-mpi MPI=openmpi
make -s build-mpi MPI=mpich
W=$OUT/train-work
rm -rf "$W"
mkdir -p "$W"
RUNS=$OUT/train-runs.jsonl
: >"$RUNS"

# Open MPI 4.1's PMIx asks munged for credentials first and, when munged is
# not running, retries for ~2.3 s on every launch; one host needs none.
export PMIX_MCA_psec=${PMIX_MCA_psec:-native}
ompi=(mpirun.openmpi --oversubscribe -x GOMAXPROCS)
[ "$(id -u)" = 0 ] && ompi+=(--allow-run-as-root)
# torchrun on Python 3.11 needs --redirects/--tee (an enum bug in 1.13); its
# per-rank logs go under $W.
torchrun=("$TORCHRUN" --standalone --redirects 1 --tee 1 --log_dir "$W/torchrun-logs")

# record KIND LABEL REP WALL METRICS [MEMFILE]: one line of $RUNS from a
# run's metrics file (the epoch lines of batchkit train --metrics or
# torch_train.py) and its per-rank peak RSS file.
record() {
	"$PYTHON" - "$TARGET" "$@" >>"$RUNS" <<'EOF'
import json, sys
target, kind, label, rep, wall, metrics = sys.argv[1:7]
mem = sys.argv[7] if len(sys.argv) > 7 else ""
epochs = [e for e in map(json.loads, open(metrics)) if "test_acc" in e]
hit = next((e for e in epochs if e["test_acc"] >= float(target)), None)
# samples/s after the first epoch (warm-up: page faults, the first
# connections): the samples over the time of the steps of epochs 2..E.
later = epochs[1:] or epochs
secs = sum(1 / e["samples_per_second"] for e in later)
sps = len(later) / secs if secs else None
r = {"kind": kind, "label": label, "rep": int(rep), "wall_s": float(wall), "epochs": len(epochs),
     "epoch_at_target": hit and hit["epoch"], "loop_to_target_s": hit and hit["elapsed"],
     "final_test_acc": epochs[-1]["test_acc"], "samples_per_second": sps}
if mem:
    r["rank_peak_rss_kib"] = [int(l) for l in open(mem) if l.strip()]
print(json.dumps(r))
EOF
}

# timed LABEL CMD...: runs CMD with stdout and stderr to $W/LABEL.log and sets
# WALL to its wall time in seconds (bash's clock: no process around it).
timed() {
	local label=$1 t0 t1
	shift
	t0=$EPOCHREALTIME
	"$@" >"$W/$label.log" 2>&1 || { echo "bench-train: $label failed:" >&2; tail -20 "$W/$label.log" >&2; exit 1; }
	t1=$EPOCHREALTIME
	WALL=$("$PYTHON" -c "print($t1 - $t0)")
}

# The programs at world size 2 with the default model and flags; EPOCHS
# (their own) and MEM (where each rank's /usr/bin/time appends its %M) set
# per run.
torch2() { "${torchrun[@]}" --nproc_per_node 2 --no_python /usr/bin/time -a -o "$MEM" -f %M "$PYTHON" "$REF" --epochs "$EPOCHS" --metrics "$M"; }
bk2() { "$BK" run -n 2 -- /usr/bin/time -a -o "$MEM" -f %M "$BK" train --epochs "$EPOCHS" --metrics "$M" --format json; }

# independent N FLAGS...: N single-rank trainings at once, no communication
# between them: what the machine gives N processes at a time (cores, memory
# bandwidth, whatever else runs), the ceiling of the scaling measurements.
# Their --metrics are merged into $M, samples/s summed epoch by epoch.
independent() {
	local n=$1 i pids=()
	shift
	for i in $(seq "$n"); do
		"$BK" train "$@" --metrics "$M.$i" --format json &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	"$PYTHON" - "$M" "$n" <<'EOF'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
runs = [[json.loads(l) for l in open("%s.%d" % (out, i + 1))] for i in range(n)]
with open(out, "w") as f:
    for epochs in zip(*runs):
        e = dict(epochs[0], samples_per_second=sum(x["samples_per_second"] for x in epochs))
        f.write(json.dumps(e) + "\n")
EOF
}

# Calibration: the epoch at which each first reaches the target.
echo "bench-train: calibration (20 epochs each)" >&2
for prog in torch bk; do
	M=$W/calib-$prog.jsonl MEM=$W/calib-$prog.mem EPOCHS=20
	timed "calib-$prog" "${prog}2"
	record calib "$prog" 0 "$WALL" "$M"
done
read -r E_torch E_bk < <("$PYTHON" -c '
import json, sys
r = {d["label"]: d["epoch_at_target"] for d in map(json.loads, open(sys.argv[1])) if d["kind"] == "calib"}
if None in r.values():
    sys.exit("bench-train: a program never reached the target in 20 epochs: %s" % r)
print(r["torch"], r["bk"])' "$RUNS")
echo "bench-train: target $TARGET reached at epoch $E_torch (torch), $E_bk (batchkit)" >&2

# One repetition of REF/PROG with an A/A: reference, program, reference,
# program; the reference's two labels swap every repetition.
for rep in $(seq "$REPS"); do
	echo "bench-train: repetition $rep of $REPS: time to $TARGET and memory, world size 2" >&2
	first=torch second=torch-aa
	if [ $((rep % 2)) = 0 ]; then first=torch-aa second=torch; fi
	for label in "$first" bk "$second" bk-aa; do
		M=$W/t95-$label-$rep.jsonl MEM=$W/t95-$label-$rep.mem
		if [[ $label == torch* ]]; then EPOCHS=$E_torch prog=torch2; else EPOCHS=$E_bk prog=bk2; fi
		timed "t95-$label-$rep" "$prog"
		record t95 "$label" "$rep" "$WALL" "$M" "$MEM"
	done

	echo "bench-train: repetition $rep of $REPS: samples/s, 1 rank, --hidden 1024,1024 batch 64" >&2
	for label in "$first" bk "$second" bk-aa; do
		M=$W/tput-$label-$rep.jsonl
		if [[ $label == torch* ]]; then
			timed "tput-$label-$rep" "$PYTHON" "$REF" --threads 1 "${BIG[@]}" --metrics "$M"
		else
			timed "tput-$label-$rep" env GOMAXPROCS=1 "$BK" train "${BIG[@]}" --metrics "$M"
		fi
		record tput "$label" "$rep" "$WALL" "$M"
	done

	echo "bench-train: repetition $rep of $REPS: scaling 1 -> 2 ranks" >&2
	one=1 one_aa=1-aa
	if [ $((rep % 2)) = 0 ]; then one=1-aa one_aa=1; fi
	for backend in independent tcp openmpi mpich; do
		for label in "$one" 2 "$one_aa"; do
			n=${label%-aa}
			M=$W/scale-$backend-$label-$rep.jsonl
			case $backend in
			independent) launch=(independent "$n") ;;
			tcp) launch=("$BK" run -n "$n" -- "$BK" train --backend tcp) ;;
			openmpi) launch=("${ompi[@]}" -n "$n" bin/batchkit-openmpi train --backend mpi) ;;
			mpich) launch=(mpirun.mpich -n "$n" bin/batchkit-mpich train --backend mpi) ;;
			esac
			GOMAXPROCS=1 timed "scale-$backend-$label-$rep" "${launch[@]}" "${BIG[@]}" --metrics "$M"
			record "scale-$backend" "$label" "$rep" "$WALL" "$M"
		done
	done
done

"$PYTHON" - "$RUNS" "$REPS" "$TARGET" <<'EOF' | tee "$OUT/train-summary.txt"
import json, statistics, sys

runs = [json.loads(l) for l in open(sys.argv[1])]
reps, target = int(sys.argv[2]), float(sys.argv[3])

def val(kind, label, rep, key):
    for r in runs:
        if r["kind"] == kind and r["label"] == label and r["rep"] == rep:
            v = r[key]
            return max(v) if isinstance(v, list) else v  # memory: the larger rank
    raise KeyError((kind, label, rep, key))

def spread(xs):
    return "%.3f [%.3f-%.3f]" % (statistics.median(xs), min(xs), max(xs))

def verdict(xs, goal, lower_is_better):
    med = statistics.median(xs)
    if (med <= goal) if lower_is_better else (med >= goal):
        return "met"
    if (min(xs) <= goal) if lower_is_better else (max(xs) >= goal):
        return "inside the spread"
    return "missed by %.0f %%" % (100 * abs(med / goal - 1))

rows = []
def pair(name, kind, key, goal, lower, num="bk", den="torch", aa=("torch-aa", "torch"), aa2=("bk-aa", "bk"), unit=""):
    R = range(1, reps + 1)
    ratio = [val(kind, num, r, key) / val(kind, den, r, key) for r in R]
    a = [val(kind, aa[0], r, key) / val(kind, aa[1], r, key) for r in R]
    b = [val(kind, aa2[0], r, key) / val(kind, aa2[1], r, key) for r in R]
    absn = statistics.median(val(kind, num, r, key) for r in R)
    absd = statistics.median(val(kind, den, r, key) for r in R)
    rows.append((name, ("<= " if lower else ">= ") + "%.2f" % goal, spread(ratio), spread(a), spread(b),
                 "%s / %s" % (fmt(absn, unit), fmt(absd, unit)), verdict(ratio, goal, lower)))

def fmt(v, unit):
    if unit == "s":
        return "%.3f s" % v
    if unit == "MiB":
        return "%.1f MiB" % (v / 1024)
    return "%.0f /s" % v

pair("time to %.0f %%, whole launch (a)" % (100 * target), "t95", "wall_s", 0.3, True, unit="s")
pair("time to %.0f %%, training loop (b)" % (100 * target), "t95", "loop_to_target_s", 0.5, True, unit="s")
pair("peak RSS per rank (largest rank)", "t95", "rank_peak_rss_kib", 0.2, True, unit="MiB")
pair("samples/s, 1 rank, 1 thread, 1024x1024", "tput", "samples_per_second", 0.5, False)
R = range(1, reps + 1)
def efficiency(kind):
    return [val(kind, "2", r, "samples_per_second") / (2 * val(kind, "1", r, "samples_per_second")) for r in R]
ceiling = efficiency("scale-independent")
for b in ("independent", "tcp", "openmpi", "mpich"):
    kind = "scale-" + b
    eff = efficiency(kind)
    a = [val(kind, "1-aa", r, "samples_per_second") / val(kind, "1", r, "samples_per_second") for r in R]
    s1 = statistics.median(val(kind, "1", r, "samples_per_second") for r in R)
    s2 = statistics.median(val(kind, "2", r, "samples_per_second") for r in R)
    if b == "independent":  # the control: no goal, no communication
        rows.append(("2 independent 1-rank runs at once (ceiling)", "-", spread(eff), spread(a), "-",
                     "%.0f /s for both, %.0f /s alone" % (s2, s1), "-"))
        continue
    # Against the ceiling of the same repetition: what communication and
    # synchronisation cost, apart from what the machine gives 2 processes.
    vs = [e / c for e, c in zip(eff, ceiling)]
    rows.append(("scaling 1->2 ranks, %s (efficiency)" % b, ">= 0.85", spread(eff), spread(a), "-",
                 "%.0f /s at 2, %.0f /s at 1; / ceiling %s" % (s2, s1, spread(vs)), verdict(eff, 0.85, False)))

calib = {r["label"]: r for r in runs if r["kind"] == "calib"}
print("# batchkit train against PyTorch DDP (%s), %d repetitions; median [min-max]" % (
    "gloo, CPU", reps))
print("# ratio: batchkit / torch (scaling: samples/s at 2 ranks / (2 x at 1)); A/A ref: the reference's")
print("# second run / its first (scaling: the 1-rank run again); A/A bk: batchkit's second run / its first")
print("# %.0f %% test accuracy first at epoch %d (torch), %d (batchkit), of 20; final %.4f / %.4f" % (
    100 * target, calib["torch"]["epoch_at_target"], calib["bk"]["epoch_at_target"],
    calib["torch"]["final_test_acc"], calib["bk"]["final_test_acc"]))
head = ("comparison", "goal", "ratio", "A/A ref", "A/A bk", "batchkit / torch (medians)", "verdict")
w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
for r in [head] + rows:
    print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())
EOF
echo "bench-train: wrote $OUT/train-summary.txt and $OUT/train-runs.jsonl" >&2
