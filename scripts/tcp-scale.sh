#!/usr/bin/env bash
# The TCP backend at hundreds of ranks (docs/performance.md, "TCP backend at
# scale"). For each world size, on this machine:
#   1. BenchmarkTCPScale (trainer/collective/tcp/scale_test.go): N processes,
#      GOMAXPROCS=1 each, form the world and run ten 8-byte allreduces; one
#      Markdown row with when the last rank started, when the world was up,
#      when the last allreduce was done, the connections per rank and the
#      peak RSS per rank;
#   2. the user's command, timed end to end, each rank's peak RSS taken by
#      /usr/bin/time (Debian's package time):
#      GOMAXPROCS=1 batchkit run -n N -- batchkit bench --backend tcp \
#          --min-bytes 8 --max-bytes 8 --iters 10
# The machine is shared: each size runs once, the sizes one after the other.
#
#   scripts/tcp-scale.sh                  # 64 128 256 512
#   SIZES="512 1024" scripts/tcp-scale.sh
#   BATCHKIT_TCP_SHM=0 scripts/tcp-scale.sh   # every link on TCP
#   LABEL=before scripts/tcp-scale.sh         # the table's title (default: git describe)
#
# Writes $OUT/tcp-scale.md (both tables) and each size's logs under $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-bench-results}
SIZES=${SIZES:-"64 128 256 512"}
TIMEOUT=${TIMEOUT:-60s}
GO=${GO:-go}
mkdir -p "$OUT"
$GO build -o bin/batchkit ./cmd/batchkit
$GO test -c -o "$OUT/tcp.test" ./trainer/collective/tcp

LABEL=${LABEL:-$(git describe --always --dirty 2>/dev/null || echo "this tree")}
echo "# TCP backend at scale ($(date -u +%Y-%m-%dT%H:%MZ), $LABEL, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))" > "$OUT/tcp-scale.md"
echo >> "$OUT/tcp-scale.md"
BATCHKIT_TCP_SCALE_SIZES=$(tr ' ' , <<<"$SIZES") BATCHKIT_TCP_SCALE_TIMEOUT=$TIMEOUT \
	"$OUT/tcp.test" -test.run '^$' -test.bench '^BenchmarkTCPScale$' -test.benchtime 1x \
	| tee "$OUT/tcp-scale-bench.txt" | grep '^|' >> "$OUT/tcp-scale.md"

echo >> "$OUT/tcp-scale.md"
echo '| ranks | `batchkit run … bench`, wall time | exit status | peak RSS per rank: median / max |' >> "$OUT/tcp-scale.md"
echo "|---|---|---|---|" >> "$OUT/tcp-scale.md"
# Each rank runs under /usr/bin/time, which prints its peak RSS (KB) as
# "maxrss=N" on stderr, behind batchkit run's "[rank] " prefix.
for n in $SIZES; do
	log="$OUT/tcp-scale-run-$n.log"
	start=$(date +%s.%N)
	status=0
	GOMAXPROCS=1 bin/batchkit run -n "$n" -- /usr/bin/time -f 'maxrss=%M' bin/batchkit bench --backend tcp \
		--min-bytes 8 --max-bytes 8 --iters 10 --rendezvous-timeout "$TIMEOUT" >"$log" 2>&1 || status=$?
	end=$(date +%s.%N)
	rss=$(sed -n 's/.*maxrss=\([0-9]*\)$/\1/p' "$log" | sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.1f MiB / %.1f MiB", a[int((NR+1)/2)]/1024, a[NR]/1024}')
	printf '| %d | %.1f s | %d | %s |\n' "$n" "$(echo "$end - $start" | bc)" "$status" "$rss" >> "$OUT/tcp-scale.md"
done
cat "$OUT/tcp-scale.md"
