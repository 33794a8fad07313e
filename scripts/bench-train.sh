#!/usr/bin/env bash
# make bench-train: batchkit train against PyTorch DDP (gloo, CPU;
# trainer/bench/reference/torch_train.py) in two builds: a current PyTorch from
# the package index (its MKL and oneDNN CPU kernels; torch-requirements.txt,
# installed into a virtual environment by torch-venv.sh when missing) and
# Debian's python3-torch 1.13 (the netlib reference BLAS), measured side by
# side in one run on this machine and reported as ratios with their spread over
# REPS alternating repetitions (docs/reference/collectives.md "Performance",
# method in docs/performance.md):
#   - time to 95 % test accuracy at world size 2, each launched the way its
#     users launch it (torchrun --nproc_per_node 2; batchkit run -n 2):
#     (a) the whole launch, start to exit, (b) the training loop alone (the
#     metrics' elapsed of the first epoch at 95 %: from just before the first
#     step to that epoch's evaluation). Each program runs exactly the epochs
#     it needs, found by one calibration run of 20 epochs;
#   - peak resident memory (VmHWM, /usr/bin/time's %M) of every rank of the
#     same run;
#   - samples/s where compute dominates (--hidden 1024,1024, batch 64): one
#     rank against torch with one thread, in each build of batchkit (BKS: bk,
#     the plain binary's pure-Go gonum; bk-mkl and bk-openblas, the binaries
#     of make build-blas BLAS=mkl|openblas, OMP_NUM_THREADS=1), and the
#     scaling from 1 to 2 ranks (samples/s at 2 / (2 × at 1)) on the TCP and
#     both MPI backends, and on TCP with the mkl build (tcp-mkl, its control
#     independent-mkl).
#     GOMAXPROCS=1 on every rank: gonum's Sgemm runs blocks on GOMAXPROCS
#     goroutines, so a rank would otherwise use both of a 2-core machine's
#     cores and the 1-rank figure would not be one core's. A control beside
#     them: two independent 1-rank runs at once, no communication at all,
#     the most 2 processes get out of this machine at that moment;
#   - the machine's practical FP32 peak (sgemm_peak.py: a 2048^3 SGEMM through
#     the current torch's MKL and numpy's OpenBLAS, 1 thread and all cores), so
#     that each samples/s is also given as GFLOP/s (the MLP's FLOPs: forward
#     2·in·out per layer and sample, backward twice that) beside its ceiling.
# Every comparison has an A/A control: each reference runs before and after
# the program in each repetition (the order of a reference's two labels
# swapping every repetition), and its second run is compared with its first,
# as is batchkit's own second run; for the scaling, the 1-rank run is
# repeated after the 2-rank one.
# Installs what is missing (as root: Debian's packages; the venvs), so that a
# fresh machine needs nothing done by hand; the BLAS builds as make does:
# oneMKL by make mkl-stack, libopenblas-dev never (it switches Debian's
# libblas.so.3, torch113's BLAS, to OpenBLAS): a build that cannot be made is
# skipped with a line saying why, in the summary too.
# Knobs: REPS (5), OUT (bench-results), PARTS (t95,tput,scale: the time to
# 95 % and memory with its calibration; samples/s with the FP32 peak; the
# scaling), REFS ("torch torch113": the references measured), BACKENDS (the
# scaling's, default all: independent tcp openmpi mpich independent-mkl
# tcp-mkl). PARTS=tput REFS=torch REPS=2 gives the samples/s table alone
# (~3 minutes on a quiet 2-core machine, 2-3 times that under load).
# Writes $OUT/train-runs.jsonl (one line per run) and $OUT/train-summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
REPS=${REPS:-5}
PARTS=,${PARTS:-t95,tput,scale},
for part in ${PARTS//,/ }; do
	case $part in t95 | tput | scale) ;; *) echo "bench-train: invalid PARTS part '$part' (t95, tput, scale)" >&2 && exit 2 ;; esac
done
# part NAME: true when PARTS has NAME.
part() { [[ $PARTS == *,$1,* ]]; }
PYTHON=${PYTHON:-/usr/bin/python3}
TORCHRUN=${TORCHRUN:-torchrun}
TARGET=0.95
BIG=(--hidden "1024,1024" --batch-size 64 --epochs 3)
BK=bin/batchkit
REF=trainer/bench/reference/torch_train.py
PEAK=trainer/bench/reference/sgemm_peak.py
# The products of the peak: square ones of three sizes and the step's largest
# (batch 64 x 1024 -> 1024), what a BLAS gets at the size the trainer uses.
# The ceiling is the fastest of them: on this shared VM the large squares run
# at half the rate of 512^3 (their working set against the other tenants'
# use of the cache), so 2048^3 alone would understate what a core can do.
PEAK_SHAPES=512x512x512,1024x1024x1024,2048x2048x2048,64x1024x1024
STARTED=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
SECONDS=0

# What each tool comes from in Debian; as root, missing ones are installed
# (what make test's cluster-up installs, plus time), otherwise a one-line error.
declare -A debian=([mpirun.openmpi]="openmpi-bin libopenmpi-dev" [mpirun.mpich]="mpich libmpich-dev"
	[/usr/bin/time]=time [pkg-config]=pkg-config [$TORCHRUN]=python3-torch [$PYTHON]=python3)
missing=()
for tool in "${!debian[@]}"; do
	command -v "$tool" >/dev/null || { read -ra pkgs <<<"${debian[$tool]}" && missing+=("${pkgs[@]}"); }
done
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null || missing+=(python3-torch)
if [ ${#missing[@]} -gt 0 ]; then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "bench-train: missing ${missing[*]}: apt-get install them (or run make test once as root)" >&2
		exit 2
	fi
	echo "bench-train: installing ${missing[*]}" >&2
	if ! { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }; then
		echo "bench-train: apt-get install ${missing[*]} failed" >&2
		exit 1
	fi
fi
# The current PyTorch: installed once into its venv (~2.9 GB download).
trainer/bench/reference/torch-venv.sh install
TORCH_PY=$(trainer/bench/reference/torch-venv.sh python)

make -s build
W=$OUT/train-work
rm -rf "$W"
mkdir -p "$W"
RUNS=$OUT/train-runs.jsonl
: >"$RUNS"

# The builds of batchkit, one row each: label -> its binary and its --blas
# (given, so that a build that lost its library fails instead of running
# gonum). BKS: those made here; each BLAS one needs what make build-blas
# checks for, oneMKL installed as make mkl-stack does.
declare -A bk_bin=([bk]=$BK [bk-mkl]=$BK-mkl [bk-openblas]=$BK-openblas)
declare -A bk_blas=([bk]=gonum [bk-mkl]=mkl [bk-openblas]=openblas)
BKS=(bk)
for blas in mkl openblas; do
	why=
	if [ "$blas" = mkl ] && ! why=$(scripts/mkl-stack.sh install 2>&1); then
		why="make mkl-stack failed: $(tail -1 <<<"$why")"
	elif ! why=$(make -s build-blas BLAS=$blas 2>&1); then
		# Its last line that is not make's own "*** ... Error 2".
		why=$(grep -v '^make: \*\*\*' <<<"$why" | tail -1)
	else
		why=
		BKS+=("bk-$blas")
	fi
	if [ -n "$why" ]; then
		echo "bench-train: skipping bk-$blas (bin/batchkit-$blas): $why" >&2
		"$PYTHON" -c 'import json, sys; print(json.dumps({"kind": "skip", "label": sys.argv[1], "rep": 0, "why": sys.argv[2]}))' "bk-$blas" "$why" >>"$RUNS"
	fi
done
for bk in "${BKS[@]}"; do
	"${bk_bin[$bk]}" version | "$PYTHON" -c '
import json, sys
blas = next((l.split(":", 1)[1].strip() for l in sys.stdin if l.startswith("blas:")), "?")
print(json.dumps({"kind": "build", "label": sys.argv[1], "rep": 0, "binary": sys.argv[2], "gemm": sys.argv[3], "blas": blas}))' \
		"$bk" "${bk_bin[$bk]}" "${bk_blas[$bk]}" >>"$RUNS"
done

# Open MPI 4.1's PMIx asks munged for credentials first and, when munged is
# not running, retries for ~2.3 s on every launch; one host needs none.
export PMIX_MCA_psec=${PMIX_MCA_psec:-native}
ompi=(mpirun.openmpi --oversubscribe -x GOMAXPROCS)
[ "$(id -u)" = 0 ] && ompi+=(--allow-run-as-root)

# The scaling's backends (BACKENDS): the control and TCP and both MPIs with
# the plain binary, the control and TCP with the mkl build when there is one.
all_backends="independent tcp openmpi mpich"
[[ " ${BKS[*]} " == *" bk-mkl "* ]] && all_backends+=" independent-mkl tcp-mkl"
read -ra BACKENDS <<<"${BACKENDS:-$all_backends}"
for backend in "${BACKENDS[@]}"; do
	[[ " $all_backends " == *" $backend "* ]] || { echo "bench-train: invalid BACKENDS entry '$backend' (of $all_backends)" >&2 && exit 2; }
done
if part scale && [[ " ${BACKENDS[*]} " == *" openmpi "* ]]; then make -s build-mpi MPI=openmpi; fi
if part scale && [[ " ${BACKENDS[*]} " == *" mpich "* ]]; then make -s build-mpi MPI=mpich; fi

# The references, one row each: label -> its python and its torchrun. torch is
# the current PyTorch of the venv, torch113 Debian's.
read -ra REFS <<<"${REFS:-torch torch113}"
for ref in "${REFS[@]}"; do
	[[ $ref == torch || $ref == torch113 ]] || { echo "bench-train: invalid REFS entry '$ref' (torch, torch113)" >&2 && exit 2; }
done
declare -A ref_python=([torch]=$TORCH_PY [torch113]=$PYTHON)
declare -A ref_torchrun=([torch]=$(dirname "$TORCH_PY")/torchrun [torch113]=$TORCHRUN)
for ref in "${REFS[@]}"; do
	"${ref_python[$ref]}" -c '
import json, sys, torch
info = torch.__config__.show().replace(",", " ").split()
blas = next((w.split("=", 1)[1] for w in info if w.startswith("BLAS_INFO=")), "?")
# generic: whatever libblas.so.3 is, named by the file the process mapped
# (Debian: netlib, or OpenBLAS through the alternatives system once a
# libopenblas0 package is installed). The PyPI torch links MKL in statically.
if blas == "generic":
    a = torch.ones(64, 64)
    a @ a
    blas += "".join(sorted({" " + l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.rsplit("/", 1)[-1]}))
print(json.dumps({"kind": "ref", "label": sys.argv[1], "rep": 0, "version": torch.__version__, "blas": blas,
                  "mkl": torch.backends.mkl.is_available(), "mkldnn": torch.backends.mkldnn.is_available()}))' "$ref" >>"$RUNS"
	"${ref_python[$ref]}" -c 'import torch; print(torch.__config__.show())' >"$W/torch-config-$ref.txt"
done

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
	"$@" >"$W/$label.log" 2>&1 || finished "$label" || { echo "bench-train: $label failed:" >&2; tail -20 "$W/$label.log" >&2; exit 1; }
	t1=$EPOCHREALTIME
	WALL=$("$PYTHON" -c "print($t1 - $t0)")
}

# finished LABEL: a torchrun launch that failed after its rank 0 wrote the
# run's closing line to $M (training and evaluation done) is kept, with a
# warning: torch 2.15's gloo sometimes aborts a rank in its teardown
# ("terminate called without an active exception", 1 launch in ~20 here).
finished() {
	[[ $1 == t95-torch* || $1 == calib-torch* ]] && grep -q '"time_to_target"' "$M" 2>/dev/null || return 1
	echo "bench-train: warning: $1 failed after it finished (kept; log in $W/$1.log)" >&2
}

# The programs at world size 2 with the default model and flags; EPOCHS
# (their own) and MEM (where each rank's /usr/bin/time appends its %M) set
# per run. torch2 REF: that reference under its own torchrun (on Python 3.11
# 1.13's needs --redirects/--tee, an enum bug; the current one takes them too),
# its per-rank logs under $W.
torch2() {
	"${ref_torchrun[$1]}" --standalone --redirects 1 --tee 1 --log_dir "$W/torchrun-logs" --nproc_per_node 2 \
		--no_python /usr/bin/time -a -o "$MEM" -f %M "${ref_python[$1]}" "$REF" --epochs "$EPOCHS" --metrics "$M"
}
bk2() { "$BK" run -n 2 -- /usr/bin/time -a -o "$MEM" -f %M "$BK" train --epochs "$EPOCHS" --metrics "$M" --format json; }

# independent BIN N FLAGS...: N single-rank trainings of BIN at once, no communication
# between them: what the machine gives N processes at a time (cores, memory
# bandwidth, whatever else runs), the ceiling of the scaling measurements.
# Their --metrics are merged into $M, samples/s summed epoch by epoch.
independent() {
	local bin=$1 n=$2 i pids=()
	shift 2
	for i in $(seq "$n"); do
		"$bin" train "$@" --metrics "$M.$i" --format json &
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

# peak REP: the machine's practical FP32 peak in this repetition: the current
# torch (MKL) and numpy (OpenBLAS) at 1 thread and all cores, and Debian's
# 1.13 (netlib) at the step's shape on 1 thread (a large product would take
# it minutes). One line of $RUNS per product, kind "peak".
peak() {
	local rep=$1
	# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which some machines set to keep an
	# old OpenBLAS off kernels it gets wrong, would slow numpy's current one:
	# unset here alone (the summary names the kernel it then runs).
	timed "peak-$rep" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$TORCH_PY" "$PEAK" --libs torch,numpy --threads "1,$(nproc)" --shapes "$PEAK_SHAPES"
	: >"$W/peak113-$rep.log"
	if [[ " ${REFS[*]} " == *" torch113 "* ]]; then
		timed "peak113-$rep" env OMP_NUM_THREADS=1 "$PYTHON" "$PEAK" --libs torch --threads 1 --shapes 64x1024x1024
	fi
	cat "$W/peak-$rep.log" "$W/peak113-$rep.log" | "$PYTHON" -c '
import json, sys
for l in sys.stdin:
    if l.startswith("{"):
        r = json.loads(l)
        print(json.dumps(dict(r, kind="peak", label="%s-%s-%dt-%dx%dx%d" % (r["lib"], r["version"], r["threads"], r["m"], r["n"], r["k"]), rep=int(sys.argv[1]))))' "$rep" >>"$RUNS"
}

# order REP "BK..." BASE...: the run labels of one repetition: every BASE's
# first run, each batchkit build BK, every BASE's second run, each BK again
# (BK-aa); a BASE's two labels (BASE, BASE-aa) swap every repetition.
order() {
	local rep=$1 b first=() second=() bks
	read -ra bks <<<"$2"
	shift 2
	for b in "$@"; do
		if [ $((rep % 2)) = 1 ]; then first+=("$b") second+=("$b-aa"); else first+=("$b-aa") second+=("$b"); fi
	done
	echo "${first[*]} ${bks[*]} ${second[*]} ${bks[*]/%/-aa}"
}

# Calibration: the epoch at which each first reaches the target.
declare -A E
if part t95; then
	echo "bench-train: calibration (20 epochs each)" >&2
	for prog in "${REFS[@]}" bk; do
		M=$W/calib-$prog.jsonl MEM=$W/calib-$prog.mem EPOCHS=20
		if [ "$prog" = bk ]; then timed "calib-$prog" bk2; else timed "calib-$prog" torch2 "$prog"; fi
		record calib "$prog" 0 "$WALL" "$M"
	done
	while read -r prog e; do E[$prog]=$e; done < <("$PYTHON" -c '
import json, sys
r = {d["label"]: d["epoch_at_target"] for d in map(json.loads, open(sys.argv[1])) if d["kind"] == "calib"}
if None in r.values():
    sys.exit("bench-train: a program never reached the target in 20 epochs: %s" % r)
for k, v in r.items():
    print(k, v)' "$RUNS")
	echo "bench-train: target $TARGET reached at epoch $(for p in "${REFS[@]}" bk; do printf '%s (%s) ' "${E[$p]}" "$p"; done)" >&2
fi

# One repetition: each reference and batchkit twice (order), the references'
# labels swapping every repetition; each part that PARTS has.
for rep in $(seq "$REPS"); do
	if part tput; then
		echo "bench-train: repetition $rep of $REPS: FP32 peak (SGEMM)" >&2
		peak "$rep"
	fi

	if part t95; then
		echo "bench-train: repetition $rep of $REPS: time to $TARGET and memory, world size 2" >&2
		for label in $(order "$rep" bk "${REFS[@]}"); do
			M=$W/t95-$label-$rep.jsonl MEM=$W/t95-$label-$rep.mem prog=${label%-aa}
			if [ "$prog" = bk ]; then
				EPOCHS=${E[bk]} timed "t95-$label-$rep" bk2
			else
				EPOCHS=${E[$prog]} timed "t95-$label-$rep" torch2 "$prog"
			fi
			record t95 "$label" "$rep" "$WALL" "$M" "$MEM"
		done
	fi

	if part tput; then
		echo "bench-train: repetition $rep of $REPS: samples/s, 1 rank, --hidden 1024,1024 batch 64" >&2
		for label in $(order "$rep" "${BKS[*]}" "${REFS[@]}"); do
			M=$W/tput-$label-$rep.jsonl prog=${label%-aa}
			if [ -v "bk_bin[$prog]" ]; then
				timed "tput-$label-$rep" env GOMAXPROCS=1 OMP_NUM_THREADS=1 "${bk_bin[$prog]}" train --blas "${bk_blas[$prog]}" "${BIG[@]}" --metrics "$M"
			else
				# OMP_NUM_THREADS as well as torch.set_num_threads: an OpenBLAS behind
				# Debian's libblas.so.3 takes its thread count from there, not from torch.
				timed "tput-$label-$rep" env OMP_NUM_THREADS=1 "${ref_python[$prog]}" "$REF" --threads 1 "${BIG[@]}" --metrics "$M"
			fi
			record tput "$label" "$rep" "$WALL" "$M"
		done
	fi

	part scale || continue
	echo "bench-train: repetition $rep of $REPS: scaling 1 -> 2 ranks" >&2
	one=1 one_aa=1-aa
	if [ $((rep % 2)) = 0 ]; then one=1-aa one_aa=1; fi
	for backend in "${BACKENDS[@]}"; do
		for label in "$one" 2 "$one_aa"; do
			n=${label%-aa}
			M=$W/scale-$backend-$label-$rep.jsonl
			case $backend in
			independent) launch=(independent "$BK" "$n") ;;
			independent-mkl) launch=(independent "$BK-mkl" "$n" --blas mkl) ;;
			tcp) launch=("$BK" run -n "$n" -- "$BK" train --backend tcp) ;;
			tcp-mkl) launch=("$BK-mkl" run -n "$n" -- "$BK-mkl" train --blas mkl --backend tcp) ;;
			openmpi) launch=("${ompi[@]}" -n "$n" bin/batchkit-openmpi train --backend mpi) ;;
			mpich) launch=(mpirun.mpich -n "$n" bin/batchkit-mpich train --backend mpi) ;;
			esac
			# OMP_NUM_THREADS: the mkl build's thread count; gonum's is
			# GOMAXPROCS's already.
			GOMAXPROCS=1 OMP_NUM_THREADS=1 timed "scale-$backend-$label-$rep" "${launch[@]}" "${BIG[@]}" --metrics "$M"
			record "scale-$backend" "$label" "$rep" "$WALL" "$M"
		done
	done
done

DURATION=$SECONDS
"$PYTHON" - "$RUNS" "$REPS" "$TARGET" "${BIG[1]}" "$STARTED" "$DURATION" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)" \
	"$(nproc)" "${REFS[@]}" <<'EOF' | tee "$OUT/train-summary.txt"
import csv, gzip, json, os, statistics, sys

runs = [json.loads(l) for l in open(sys.argv[1])]
reps, target, hidden = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
started, duration, load0, load1, cores = sys.argv[5:10]
refs = sys.argv[10:]
R = range(1, reps + 1)

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

def fmt(v, unit):
    if unit == "s":
        return "%.3f s" % v
    if unit == "MiB":
        return "%.1f MiB" % (v / 1024)
    return "%.0f /s" % v

def table(head, rows):
    w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())

# The MLP's FLOPs per sample: layers from the data's width and classes through
# the hidden sizes; forward 2*in*out per layer, backward twice that (the
# weights' and the inputs' gradients), the convention of the issue and of
# "6 x parameters" FLOP counts (the first layer's input gradient is counted
# though neither program computes it: 1 % here).
data = os.path.join("trainer", "data", "digits.csv.gz")
with gzip.open(data, "rt") as f:
    rows_ = [r for r in csv.reader(f) if r]
sizes = [len(rows_[0]) - 1] + [int(h) for h in hidden.split(",")] + [max(int(r[-1]) for r in rows_) + 1]
macs = sum(a * b for a, b in zip(sizes, sizes[1:]))
flop_per_sample = 6 * macs

peaks = [r for r in runs if r["kind"] == "peak"]
refinfo = {r["label"]: r for r in runs if r["kind"] == "ref"}
def name(ref):  # "torch 2.15.0+cu132 (BLAS mkl)"
    r = refinfo.get(ref)
    return "torch %s (BLAS %s)" % (r["version"], r["blas"]) if r else ref

def ceiling(threads, shape=None):
    """Per repetition the best call of any library at that thread count (and shape); medians."""
    best = [max((p["gflops_best"] for p in peaks if p["rep"] == r and p["threads"] == threads
                 and shape in (None, (p["m"], p["n"], p["k"]))), default=None) for r in R]
    best = [b for b in best if b]
    return statistics.median(best) if best else None

peak1, peakall = ceiling(1), ceiling(int(cores))
gf = lambda sps: sps * flop_per_sample / 1e9

# The builds of batchkit measured (kind "build") and those skipped, and the
# parts of the run (PARTS): a part's rows only when it ran.
builds = {r["label"]: r for r in runs if r["kind"] == "build"}
bks = [b for b in ("bk", "bk-mkl", "bk-openblas") if b in builds]
skipped = [r for r in runs if r["kind"] == "skip"]
kinds = {r["kind"] for r in runs}
def bkname(bk):  # "batchkit-mkl (mkl)"
    return "%s (%s)" % (os.path.basename(builds[bk]["binary"]), builds[bk]["gemm"])

rows = []
def pair(name_, kind, key, goal, lower, den, unit="", num="bk"):
    ratio = [val(kind, num, r, key) / val(kind, den, r, key) for r in R]
    a = [val(kind, den + "-aa", r, key) / val(kind, den, r, key) for r in R]
    b = [val(kind, num + "-aa", r, key) / val(kind, num, r, key) for r in R]
    absn = statistics.median(val(kind, num, r, key) for r in R)
    absd = statistics.median(val(kind, den, r, key) for r in R)
    rows.append((name_, ("<= " if lower else ">= ") + "%.2f" % goal, spread(ratio), spread(a), spread(b),
                 "%s / %s" % (fmt(absn, unit), fmt(absd, unit)), verdict(ratio, goal, lower)))

# Goals: issue 33's for the current torch (samples/s >= 1.0x), the earlier
# ones against Debian's 1.13 kept for its row.
for ref in refs:
    tag = "vs " + ref
    if "t95" in kinds:
        pair("time to %.0f %%, whole launch (a), %s" % (100 * target, tag), "t95", "wall_s", 0.3, True, ref, unit="s")
        pair("time to %.0f %%, training loop (b), %s" % (100 * target, tag), "t95", "loop_to_target_s", 0.5, True, ref, unit="s")
        pair("peak RSS per rank (largest rank), %s" % tag, "t95", "rank_peak_rss_kib", 0.2, True, ref, unit="MiB")
    for bk in bks if "tput" in kinds else []:
        pair("samples/s, 1 rank, 1 thread, %s, %s %s" % (hidden.replace(",", "x"), bkname(bk), tag), "tput",
             "samples_per_second", 1.0 if ref == "torch" else 0.5, False, ref, num=bk)

def efficiency(kind):
    return [val(kind, "2", r, "samples_per_second") / (2 * val(kind, "1", r, "samples_per_second")) for r in R]
backends = [b for b in ("independent", "tcp", "openmpi", "mpich", "independent-mkl", "tcp-mkl") if "scale-" + b in kinds]
# The ceiling of a backend: the control of its own build.
ceils = {c: efficiency("scale-" + c) for c in ("independent", "independent-mkl") if c in backends}
for b in backends:
    ceil2 = ceils.get("independent-mkl" if b.endswith("-mkl") else "independent")
    kind = "scale-" + b
    eff = efficiency(kind)
    a = [val(kind, "1-aa", r, "samples_per_second") / val(kind, "1", r, "samples_per_second") for r in R]
    s1 = statistics.median(val(kind, "1", r, "samples_per_second") for r in R)
    s2 = statistics.median(val(kind, "2", r, "samples_per_second") for r in R)
    g = "%.1f GFLOP/s at 2" % gf(s2) + (" (%.0f %% of the %s-core peak)" % (100 * gf(s2) / peakall, cores) if peakall else "")
    if b.startswith("independent"):  # the control: no goal, no communication
        rows.append(("2 independent 1-rank runs at once (ceiling%s)" % b[len("independent"):], "-", spread(eff), spread(a), "-",
                     "%.0f /s for both, %.0f /s alone; %s" % (s2, s1, g), "-"))
        continue
    # Against the ceiling of the same repetition: what communication and
    # synchronisation cost, apart from what the machine gives 2 processes.
    vs = spread([e / c for e, c in zip(eff, ceil2)]) if ceil2 else "not measured"
    # Issue 33 section 3's goal (issue 30's was 0.85).
    rows.append(("scaling 1->2 ranks, %s (efficiency)" % b, ">= 0.95", spread(eff), spread(a), "-",
                 "%.0f /s at 2, %.0f /s at 1; / ceiling %s; %s" % (s2, s1, vs, g), verdict(eff, 0.95, False)))

calib = {r["label"]: r for r in runs if r["kind"] == "calib"}
print("# batchkit train against PyTorch DDP (gloo, CPU): %s; %d repetitions; median [min-max]" % (
    ", ".join("%s = %s" % (ref, name(ref)) for ref in refs), reps))
print("# run: %s, %d s (%.1f min), %s cores; load average (1, 5, 15 min) %s at the start, %s at the end" % (
    started, int(duration), int(duration) / 60, cores, load0, load1))
print("# parts: %s" % ", ".join([k for k in ("t95", "tput") if k in kinds] + ["scale (%s)" % " ".join(backends)] * bool(backends)))
for bk in bks:
    print("# %s = %s (--blas %s; its blas: %s)" % (bk, builds[bk]["binary"], builds[bk]["gemm"], builds[bk]["blas"]))
for r in skipped:
    print("# %s not measured: %s" % (r["label"], r["why"]))
print("# ratio: batchkit / the reference (scaling: samples/s at 2 ranks / (2 x at 1)); A/A ref: the reference's")
print("# second run / its first (scaling: the 1-rank run again); A/A bk: batchkit's second run / its first")
if calib:
    print("# %.0f %% test accuracy first at epoch %s, of 20; final test accuracy %s" % (
        100 * target, ", ".join("%d (%s)" % (calib[p]["epoch_at_target"], p) for p in refs + ["bk"]),
        " / ".join("%.4f" % calib[p]["final_test_acc"] for p in refs + ["bk"])))
table(("comparison", "goal", "ratio", "A/A ref", "A/A bk", "batchkit / reference (medians)", "verdict"), rows)

if "tput" in kinds:
    print()
    print("# FP32 peak: C = A @ B, the best call of each product in each repetition; median [min-max] over repetitions")
    prows = []
    order = lambda p: (p["lib"] != "torch", not p["version"].startswith("2"), p["threads"], -p["m"])
    for label in sorted({p["label"] for p in peaks}, key=lambda l: order(next(p for p in peaks if p["label"] == l))):
        ps = [p for p in peaks if p["label"] == label]
        p0 = ps[0]
        prows.append(("%s %s" % (p0["lib"], p0["version"]), p0["blas"], p0["threads"], "%dx%dx%d" % (p0["m"], p0["n"], p0["k"]),
                      spread([p["gflops_best"] for p in ps]), spread([p["gflops_median"] for p in ps])))
    table(("library", "BLAS", "threads", "MxNxK", "GFLOP/s, best call", "GFLOP/s, median call"), prows)

    print()
    print("# A training step in GFLOP/s, 1 rank, 1 thread: samples/s x %.2f MFLOP per sample (layers %s: forward" % (
        flop_per_sample / 1e6, "-".join(map(str, sizes))))
    print("# 2*in*out per layer, backward twice that); ceiling: the fastest 1-thread product above, %s GFLOP/s;" % (
        "%.1f" % peak1 if peak1 else "not measured"))
    print("# goal (issue 33 section 2): a batchkit step at >= 70 % of it")
    step = ceiling(1, (64, 1024, 1024))
    grows = []
    for label in bks + refs:
        sps = [val("tput", label, r, "samples_per_second") for r in R]
        g = [gf(x) for x in sps]
        of = [x / peak1 for x in g] if peak1 else None
        grows.append((bkname(label) if label in builds else name(label), "%.0f" % statistics.median(sps), spread(g),
                      "%.0f %% [%.0f-%.0f]" % (100 * statistics.median(of), 100 * min(of), 100 * max(of)) if of else "-",
                      "%.0f %%" % (100 * statistics.median(g) / step) if step else "-",
                      verdict(of, 0.7, False) if of and label in builds else "-"))
    table(("program", "samples/s", "GFLOP/s", "of the peak", "of the best 64x1024x1024 SGEMM", ">= 70 % of the peak"), grows)
EOF
echo "bench-train: wrote $OUT/train-summary.txt and $OUT/train-runs.jsonl" >&2
