#!/usr/bin/env bash
# make bench-ab: the MPI backend of this working tree ("new") against the
# one of another commit ("old", BASE, default main), in one run, with an A/A
# control (old against itself), for Open MPI and MPICH, 2 ranks, allreduce
# float32. Every launch runs one size (`batchkit bench --backend mpi`), and
# the launches take turns: per round, size and MPI, old, new, old again (the
# A/A) and any VARIANTS, in an order that rotates every round, so that all
# of them see the same moments of a shared machine. Reported per MPI and
# size: the median over rounds of each program's time per call against old's
# in the same round (new/old; below 1 is faster), with the lowest and
# highest round, and the same for old's second launch (A/A: the same binary,
# so its spread is what this run can resolve). docs/performance.md has a
# run's table and how to read it.
#
#   scripts/bench-ab.sh                          # main against the working tree
#   BASE=HEAD~3 ROUNDS=4 scripts/bench-ab.sh
#   VARIANTS="gosched=/tmp/bk-gs" scripts/bench-ab.sh   # also /tmp/bk-gs-openmpi, -mpich
#
# Writes $OUT/ab.jsonl (one line per launch) and $OUT/ab-summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
BASE=${BASE:-main}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-}
# size:iterations. Timed windows of ~20-300 ms: long enough that one
# scheduler hiccup is not the whole window, short enough for many rounds.
SIZES=${SIZES:-"8:20000 65536:2000 1048576:200 16777216:30 67108864:10"}
NP=2

for tool in mpirun.openmpi mpirun.mpich python3 git; do
	command -v "$tool" >/dev/null || { echo "bench-ab: $tool not found (make test installs everything)" >&2; exit 2; }
done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# old: BASE's tree in a throw-away worktree, built with its own Makefile.
base=$(mktemp -d)
trap 'git worktree remove --force "$base" >/dev/null 2>&1 || rm -rf "$base"' EXIT
git worktree add --detach "$base" "$BASE" >/dev/null
declare -A bin
for lib in openmpi mpich; do
	make -s -C "$base" build-mpi MPI=$lib >/dev/null
	make -s build-mpi MPI=$lib >/dev/null
	cp "$base/bin/batchkit-$lib" "$OUT/ab-old-$lib"
	cp "bin/batchkit-$lib" "$OUT/ab-new-$lib"
	bin[old-$lib]=$OUT/ab-old-$lib bin[old-aa-$lib]=$OUT/ab-old-$lib bin[new-$lib]=$OUT/ab-new-$lib
done
labels=(old new old-aa)
for v in $VARIANTS; do
	labels+=("${v%%=*}")
	for lib in openmpi mpich; do bin[${v%%=*}-$lib]=${v#*=}-$lib; done
done

# Open MPI 4.1's PMIx asks munged for credentials first and, when munged is
# not running, retries for ~2.3 s on every launch; one host needs none.
export PMIX_MCA_psec=${PMIX_MCA_psec:-native}
ompi=(mpirun.openmpi --oversubscribe -n "$NP")
[ "$(id -u)" = 0 ] && ompi+=(--allow-run-as-root)
mpich=(mpirun.mpich -n "$NP")

: >"$OUT/ab.jsonl"
for round in $(seq "$ROUNDS"); do
	echo "bench-ab: round $round of $ROUNDS" >&2
	# This round's order: the labels rotated by the round.
	order=("${labels[@]:round%${#labels[@]}}" "${labels[@]:0:round%${#labels[@]}}")
	for si in $SIZES; do
		for lib in openmpi mpich; do
			if [ "$lib" = openmpi ]; then launch=("${ompi[@]}"); else launch=("${mpich[@]}"); fi
			for label in "${order[@]}"; do
				"${launch[@]}" "${bin[$label-$lib]}" bench --backend mpi --format json \
					--min-bytes "${si%:*}" --max-bytes "${si%:*}" --iters "${si#*:}" |
					python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"label": sys.argv[1], "lib": sys.argv[2], "round": int(sys.argv[3]), "bytes": r["bytes"], "us": r["avg_us"]}))' \
						"$label" "$lib" "$round" >>"$OUT/ab.jsonl"
			done
		done
	done
done

python3 - "$OUT/ab.jsonl" <<'EOF' | tee "$OUT/ab-summary.md"
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
us = {(r["label"], r["lib"], r["round"], r["bytes"]): r["us"] for r in runs}
labels = [l for l in dict.fromkeys(r["label"] for r in runs) if l != "old"]
def size(b):
    for unit in ("B", "KiB", "MiB"):
        if b < 1024 or b % 1024:
            return "%d %s" % (b, unit)
        b //= 1024
    return "%d GiB" % b
print("| MPI | size | old µs/call (median) | " + " | ".join("%s/old median [min–max]" % l for l in labels) + " |")
print("|---|---|---:|" + "---|" * len(labels))
for lib in dict.fromkeys(r["lib"] for r in runs):
    for b in sorted({r["bytes"] for r in runs}):
        rounds = sorted({r["round"] for r in runs if r["lib"] == lib and r["bytes"] == b})
        old = [us[("old", lib, n, b)] for n in rounds if ("old", lib, n, b) in us]
        cells = []
        for l in labels:
            q = [us[(l, lib, n, b)] / us[("old", lib, n, b)] for n in rounds if (l, lib, n, b) in us and ("old", lib, n, b) in us]
            cells.append("%.3f [%.2f–%.2f] (%d)" % (statistics.median(q), min(q), max(q), len(q)) if q else "–")
        print("| %s | %s | %.2f | %s |" % (lib, size(b), statistics.median(old), " | ".join(cells)))
EOF
echo "bench-ab: wrote $OUT/ab.jsonl and $OUT/ab-summary.md" >&2
