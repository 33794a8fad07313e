/*
 * mpi_bench.c - the C/MPI reference for `batchkit bench`.
 *
 * It measures exactly what trainer/bench does (see trainer/bench/doc.go and
 * params.go), straight on MPI, so that the Go MPI backend's numbers can be
 * compared 1:1 with the library it wraps:
 *
 *   mpicc.openmpi -O2 -o mpi_bench_ompi  mpi_bench.c
 *   mpicc.mpich   -O2 -o mpi_bench_mpich mpi_bench.c
 *   mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 ./mpi_bench_ompi
 *   mpirun.mpich -n 2 ./mpi_bench_mpich --op allgather --max-bytes 16M
 *
 * Options (all optional):
 *   --op allreduce|broadcast|allgather|reducescatter   (default allreduce)
 *   --dtype float32|float64                            (default float32)
 *   --min-bytes SIZE   --max-bytes SIZE                (default 8 and 64M)
 *   --iters N          timed iterations (warm-up becomes max(1, N/10))
 *   --thread single|funneled|serialized|multiple       (default serialized)
 *   --label TEXT       stored as "label" in every line (the plot legend)
 * SIZE is a number of bytes with an optional K, KiB, M, MiB, G or GiB
 * (binary multiples) and an optional B, in any case, as batchkit accepts.
 *
 * Before the sweep the first size's operation runs untimed, in batches of
 * 10, until every rank has run for 300 ms (batchkit's bench.SettleTime).
 *
 * The measurement, per size (sizes min, 2min, 4min, ... <= max, each rounded
 * down to a multiple of the element size, times the number of ranks for
 * allgather and reducescatter; sizes that round to 0 and repeats skipped):
 *   - allreduce: out of place, MPI_SUM, bytes = each rank's buffer;
 *     broadcast: in place from root 0, bytes = the buffer;
 *     allgather: bytes = the gathered (receive) buffer;
 *     reducescatter: MPI_Reduce_scatter_block, MPI_SUM, bytes = the input.
 *   - schedule: bytes <= 64 KiB: 100 warm-up, 1000 timed; <= 1 MiB: 20, 200;
 *     <= 16 MiB: 5, 50; larger: 2, 20; --iters N: max(1, N/10), N.
 *   - warm-up, MPI_Barrier, t0 = MPI_Wtime(), the timed loop, t1; a rank's
 *     time is (t1 - t0) / iters; avg = MPI_Allreduce(SUM) / n, then max and
 *     min with one MPI_Allreduce(MAX) of {t, -t}.
 *   - rank 0 prints one JSON line per size with the keys of batchkit's
 *     Result: op, backend ("c-openmpi", "c-mpich", from
 *     MPI_Get_library_version, or -DBK_BACKEND='"name"'), dtype, ranks,
 *     bytes, count, iters, warmup, avg_us, min_us, max_us (3 decimals),
 *     algbw_gbs = bytes / avg / 1e9 and busbw_gbs = algbw x factor
 *     (2(n-1)/n allreduce, (n-1)/n allgather and reducescatter, 1 broadcast
 *     and for a single rank) with 6 decimals.
 *
 * MPI is initialised with MPI_Init_thread at --thread, by default
 * MPI_THREAD_SERIALIZED: the level batchkit's Go backend needs (goroutines
 * move between OS threads), and one that costs something in some MPIs (Open
 * MPI 4.1 then takes mutexes on its request paths, about 0.3 us per small
 * allreduce). Comparing batchkit with this program at the same level shows
 * the cost of the Go layer alone; --thread single shows plain MPI_Init.
 *
 * Unlike batchkit it does not check the results; it fills the inputs with
 * the same kind of small integers so that the arithmetic is the same.
 */
#include <mpi.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(float) == 4, "float must be 4 bytes");
_Static_assert(sizeof(double) == 8, "double must be 8 bytes");

enum op { ALLREDUCE, BROADCAST, ALLGATHER, REDUCESCATTER };
static const char *const op_names[] = {"allreduce", "broadcast", "allgather", "reducescatter"};

#define MAX_SIZE (16LL << 30) /* batchkit's bench.MaxSize */

static int rank, nranks;

static void die(const char *fmt, const char *arg) {
	if (rank == 0) {
		fprintf(stderr, "mpi_bench: ");
		fprintf(stderr, fmt, arg);
		fputc('\n', stderr);
	}
	MPI_Finalize();
	exit(2);
}

static void check(int rc, const char *call) {
	if (rc != MPI_SUCCESS) {
		char msg[MPI_MAX_ERROR_STRING];
		int len = 0;
		MPI_Error_string(rc, msg, &len);
		fprintf(stderr, "mpi_bench: rank %d: %s: %s\n", rank, call, msg);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* parse_size reads SIZE as described above; -1 if malformed. */
static long long parse_size(const char *s) {
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	long long n = strtoll(s, &end, 10);
	if (errno != 0 || n < 0)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	char unit[8] = {0};
	size_t k = strlen(end);
	while (k > 0 && isspace((unsigned char)end[k - 1]))
		k--;
	if (k >= sizeof unit)
		return -1;
	for (size_t i = 0; i < k; i++)
		unit[i] = (char)tolower((unsigned char)end[i]);
	long long mult;
	if (!strcmp(unit, "") || !strcmp(unit, "b"))
		mult = 1;
	else if (!strcmp(unit, "k") || !strcmp(unit, "kb") || !strcmp(unit, "kib"))
		mult = 1LL << 10;
	else if (!strcmp(unit, "m") || !strcmp(unit, "mb") || !strcmp(unit, "mib"))
		mult = 1LL << 20;
	else if (!strcmp(unit, "g") || !strcmp(unit, "gb") || !strcmp(unit, "gib"))
		mult = 1LL << 30;
	else
		return -1;
	if (n > LLONG_MAX / mult)
		return -1;
	return n * mult;
}

static void schedule(long long bytes, int iters_flag, int *warmup, int *iters) {
	if (iters_flag > 0) {
		*iters = iters_flag;
		*warmup = iters_flag / 10 > 1 ? iters_flag / 10 : 1;
	} else if (bytes <= 64LL << 10) {
		*warmup = 100, *iters = 1000;
	} else if (bytes <= 1LL << 20) {
		*warmup = 20, *iters = 200;
	} else if (bytes <= 16LL << 20) {
		*warmup = 5, *iters = 50;
	} else {
		*warmup = 2, *iters = 20;
	}
}

static double bus_factor(enum op op, int n) {
	if (n <= 1)
		return 1;
	double f = (double)(n - 1) / n;
	switch (op) {
	case ALLREDUCE: return 2 * f;
	case ALLGATHER:
	case REDUCESCATTER: return f;
	default: return 1;
	}
}

static const char *backend_name(void) {
#ifdef BK_BACKEND
	return BK_BACKEND;
#else
	static char version[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	MPI_Get_library_version(version, &len);
	if (strstr(version, "Open MPI"))
		return "c-openmpi";
	if (strstr(version, "Intel"))
		return "c-intelmpi";
	if (strstr(version, "MPICH"))
		return "c-mpich";
	return "c-mpi";
#endif
}

/* fill writes small integers (exact in float32) into n elements. */
static void fill(void *buf, size_t n, int dbl, int r) {
	for (size_t i = 0; i < n; i++) {
		double v = (double)(i % 1024 + 1) * (r + 1);
		if (dbl)
			((double *)buf)[i] = v;
		else
			((float *)buf)[i] = (float)v;
	}
}

static int once(enum op op, void *send, void *recv, int count, MPI_Datatype dt) {
	switch (op) {
	case ALLREDUCE: return MPI_Allreduce(send, recv, count, dt, MPI_SUM, MPI_COMM_WORLD);
	case BROADCAST: return MPI_Bcast(send, count, dt, 0, MPI_COMM_WORLD);
	case ALLGATHER: return MPI_Allgather(send, count, dt, recv, count, dt, MPI_COMM_WORLD);
	case REDUCESCATTER: return MPI_Reduce_scatter_block(send, recv, count, dt, MPI_SUM, MPI_COMM_WORLD);
	}
	return MPI_ERR_ARG;
}

static const char *const thread_names[] = {"single", "funneled", "serialized", "multiple"};
static const int thread_levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};

/* thread_level scans argv for --thread before MPI is initialised (MPI_Init_thread
 * needs it); main parses and validates every option afterwards. */
static int thread_level(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		if (!strncmp(argv[i], "--thread=", 9))
			v = argv[i] + 9;
		else if (!strcmp(argv[i], "--thread") && i + 1 < argc)
			v = argv[i + 1];
		for (int k = 0; v && k < 4; k++)
			if (!strcmp(v, thread_names[k]))
				return k;
	}
	return 2;
}

int main(int argc, char **argv) {
	int want = thread_level(argc, argv), provided;
	check(MPI_Init_thread(&argc, &argv, thread_levels[want], &provided), "MPI_Init_thread");
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
	check(MPI_Comm_size(MPI_COMM_WORLD, &nranks), "MPI_Comm_size");
	if (provided < thread_levels[want])
		die("MPI provides a lower thread level than --thread %s", thread_names[want]);

	enum op op = ALLREDUCE;
	const char *label = NULL;
	int dbl = 0, iters_flag = 0;
	long long min_bytes = 8, max_bytes = 64LL << 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		const char *eq = strchr(a, '=');
		char name[32];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof name)
			die("unknown option %s", a);
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
			if (rank == 0)
				printf("usage: mpi_bench [--op allreduce|broadcast|allgather|reducescatter] [--dtype float32|float64]\n"
				       "                 [--min-bytes SIZE] [--max-bytes SIZE] [--iters N]\n"
				       "                 [--thread single|funneled|serialized|multiple] [--label TEXT]\n");
			MPI_Finalize();
			return 0;
		}
		if (eq)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		else
			die("option %s needs a value", a);
		if (!strcmp(name, "--op")) {
			int found = 0;
			for (int k = 0; k < 4; k++)
				if (!strcmp(v, op_names[k]))
					op = (enum op)k, found = 1;
			if (!found)
				die("unknown --op %s (want allreduce, broadcast, allgather or reducescatter)", v);
		} else if (!strcmp(name, "--dtype")) {
			if (!strcmp(v, "float32"))
				dbl = 0;
			else if (!strcmp(v, "float64"))
				dbl = 1;
			else
				die("unknown --dtype %s (want float32 or float64)", v);
		} else if (!strcmp(name, "--min-bytes")) {
			if ((min_bytes = parse_size(v)) < 0)
				die("--min-bytes %s is not a size", v);
		} else if (!strcmp(name, "--max-bytes")) {
			if ((max_bytes = parse_size(v)) < 0)
				die("--max-bytes %s is not a size", v);
		} else if (!strcmp(name, "--thread")) {
			int found = 0;
			for (int k = 0; k < 4; k++)
				found |= !strcmp(v, thread_names[k]);
			if (!found)
				die("unknown --thread %s (want single, funneled, serialized or multiple)", v);
		} else if (!strcmp(name, "--label")) {
			for (const char *p = v; *p; p++)
				if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
					die("--label %s: no quotes, backslashes or control characters", v);
			label = v;
		} else if (!strcmp(name, "--iters")) {
			char *end;
			long n = strtol(v, &end, 10);
			if (*v == 0 || *end != 0 || n < 1 || n > INT_MAX)
				die("--iters %s: want a positive integer", v);
			iters_flag = (int)n;
		} else {
			die("unknown option %s", a);
		}
	}
	if (min_bytes < 1 || max_bytes < min_bytes || max_bytes > MAX_SIZE)
		die("bad size range: want 1 <= min-bytes <= max-bytes <= 16 GiB%s", "");

	const int esize = dbl ? 8 : 4;
	const MPI_Datatype dt = dbl ? MPI_DOUBLE : MPI_FLOAT;
	const long long unit = (long long)esize * (op == ALLGATHER || op == REDUCESCATTER ? nranks : 1);

	/* The sweep, as bench.Sizes. */
	long long sizes[64];
	int nsizes = 0;
	for (long long b = min_bytes; b > 0 && b <= max_bytes; b *= 2) {
		long long s = b / unit * unit;
		if (s > 0 && (nsizes == 0 || sizes[nsizes - 1] != s))
			sizes[nsizes++] = s;
		if (b > LLONG_MAX / 2)
			break;
	}
	if (nsizes == 0)
		die("no message sizes to run: the range has no multiple of the op's unit%s", "");
	long long max_count = sizes[nsizes - 1] / esize;
	long long per_call = op == ALLGATHER || op == REDUCESCATTER ? max_count / nranks : max_count;
	if (per_call > INT_MAX)
		die("--max-bytes is too large for one MPI call (count above INT_MAX)%s", "");

	/* Buffers for the largest size: send (the buffer, for broadcast) and recv. */
	size_t send_n = op == ALLGATHER ? (size_t)(max_count / nranks) : (size_t)max_count;
	size_t recv_n = op == BROADCAST ? 0 : op == REDUCESCATTER ? (size_t)(max_count / nranks) : (size_t)max_count;
	void *send = NULL, *recv = NULL;
	if (posix_memalign(&send, 64, send_n * esize + 64) != 0 ||
	    (recv_n > 0 && posix_memalign(&recv, 64, recv_n * esize + 64) != 0))
		die("out of memory%s", "");

	/* Settle (as batchkit's bench.SettleTime): the first size's operation,
	 * untimed, in batches of 10 until every rank has run for 300 ms, so that
	 * no measurement includes process start-up. */
	{
		long long b0 = sizes[0];
		int count0 = (int)(op == ALLGATHER || op == REDUCESCATTER ? b0 / esize / nranks : b0 / esize);
		fill(send, op == REDUCESCATTER ? (size_t)count0 * nranks : (size_t)count0, dbl, rank);
		double t0 = MPI_Wtime();
		for (int done = 0; !done;) {
			for (int it = 0; it < 10; it++)
				check(once(op, send, recv, count0, dt), op_names[op]);
			done = MPI_Wtime() - t0 >= 0.3;
			check(MPI_Allreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
		}
	}

	const char *backend = backend_name();
	for (int s = 0; s < nsizes; s++) {
		long long bytes = sizes[s];
		int count = (int)(op == ALLGATHER || op == REDUCESCATTER ? bytes / esize / nranks : bytes / esize);
		int warmup, iters;
		schedule(bytes, iters_flag, &warmup, &iters);
		fill(send, op == REDUCESCATTER ? (size_t)count * nranks : (size_t)count, dbl, rank);

		for (int it = 0; it < warmup; it++)
			check(once(op, send, recv, count, dt), op_names[op]);
		check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

		double t0 = MPI_Wtime();
		switch (op) { /* one loop per op: nothing but the call inside */
		case ALLREDUCE:
			for (int it = 0; it < iters; it++)
				check(MPI_Allreduce(send, recv, count, dt, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
			break;
		case BROADCAST:
			for (int it = 0; it < iters; it++)
				check(MPI_Bcast(send, count, dt, 0, MPI_COMM_WORLD), "MPI_Bcast");
			break;
		case ALLGATHER:
			for (int it = 0; it < iters; it++)
				check(MPI_Allgather(send, count, dt, recv, count, dt, MPI_COMM_WORLD), "MPI_Allgather");
			break;
		case REDUCESCATTER:
			for (int it = 0; it < iters; it++)
				check(MPI_Reduce_scatter_block(send, recv, count, dt, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
			break;
		}
		double mine = (MPI_Wtime() - t0) / iters;

		double sum = mine, ext[2] = {mine, -mine};
		check(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
		check(MPI_Allreduce(MPI_IN_PLACE, ext, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
		double avg = sum / nranks, lo = -ext[1], hi = ext[0];
		double algbw = avg > 0 ? (double)bytes / avg / 1e9 : 0;
		double busbw = algbw * bus_factor(op, nranks);
		if (rank == 0) {
			printf("{\"op\":\"%s\",\"backend\":\"%s\",%s%s%s\"dtype\":\"%s\",\"ranks\":%d,\"bytes\":%lld,\"count\":%lld,"
			       "\"iters\":%d,\"warmup\":%d,\"avg_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,"
			       "\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f}\n",
			       op_names[op], backend, label ? "\"label\":\"" : "", label ? label : "", label ? "\"," : "", dbl ? "float64" : "float32", nranks, bytes, bytes / esize,
			       iters, warmup, avg * 1e6, lo * 1e6, hi * 1e6, algbw, busbw);
			fflush(stdout);
		}
	}
	free(send);
	free(recv);
	MPI_Finalize();
	return 0;
}
