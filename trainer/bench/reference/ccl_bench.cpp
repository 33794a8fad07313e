/*
 * ccl_bench.cpp - the C++/oneCCL reference for `batchkit bench --backend ccl`.
 *
 * mpi_bench.c's measurement (see it and trainer/bench/doc.go), made straight
 * on oneCCL's C++ API, so that the Go ccl backend's numbers can be compared
 * 1:1 with the library it wraps. Allreduce only, float32 or float64, sum:
 *
 *   g++ -O2 -std=c++17 -I$P/include -o ccl_bench ccl_bench.cpp \
 *       -L$P/lib -lccl -Wl,--disable-new-dtags -Wl,-rpath,$P/lib
 *   BK_CCL_KVS_FILE=/tmp/kvs batchkit run -n 2 -- ./ccl_bench
 *
 * (P is the Intel stack's prefix, /opt/batchkit/intel.)
 *
 * The ranks: RANK and WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, as
 * batchkit run, torchrun and srun's wrappers set them (1 rank without). They
 * meet through a file: rank 0 creates oneCCL's main KVS and writes its
 * address to BK_CCL_KVS_FILE (a temporary file renamed into place), the
 * others wait for the file (60 s at most) and join. The launcher must remove
 * the file before each launch.
 *
 * The environment is what the ccl backend gives oneCCL (ccl.Env) where the
 * process's has none: CCL_ATL_TRANSPORT=ofi, CCL_PROCESS_LAUNCHER=none,
 * CCL_LOCAL_RANK and CCL_LOCAL_SIZE from LOCAL_RANK and LOCAL_WORLD_SIZE,
 * CCL_ATL_SHM=1 when LOCAL_WORLD_SIZE > 1, and CCL_WORKER_OFFLOAD=0 when the rank's share of the online CPUs (its
 * affinity mask divided by the local ranks, as envsetup.OneCCLOffload does
 * for ranks that share a mask) is no more than CCL_WORKER_COUNT (1).
 *
 * Options: --min-bytes SIZE --max-bytes SIZE (default 8 and 64M),
 * --dtype float32|float64, --iters N, --label TEXT; as mpi_bench.c.
 * Timing is mpi_bench.c's: settle 300 ms, then per size warm-up, a barrier,
 * the timed loop of blocking allreduces (out of place, sum), a rank's time
 * (t1 - t0) / iters; avg over the ranks, min and max; one JSON line per size
 * on rank 0 with backend "c-ccl".
 */
#include <oneapi/ccl.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

static int rank_ = 0, nranks = 1;

[[noreturn]] static void die(const std::string &msg) {
	fprintf(stderr, "ccl_bench: rank %d: %s\n", rank_, msg.c_str());
	exit(2);
}

static int env_int(const char *name, int def) {
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	long n = strtol(v, &end, 10);
	if (*end || n < 0 || n > INT_MAX)
		die(std::string(name) + "=" + v + ": want a number");
	return (int)n;
}

/* parse_size as mpi_bench.c's: a number, an optional K/KiB/M/MiB/G/GiB, B. */
static long long parse_size(const char *s) {
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	char *end;
	long long n = strtoll(s, &end, 10);
	if (n < 0)
		return -1;
	std::string unit(end);
	unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return isspace(c); }), unit.end());
	for (auto &c : unit)
		c = (char)tolower((unsigned char)c);
	long long mult;
	if (unit == "" || unit == "b")
		mult = 1;
	else if (unit == "k" || unit == "kb" || unit == "kib")
		mult = 1LL << 10;
	else if (unit == "m" || unit == "mb" || unit == "mib")
		mult = 1LL << 20;
	else if (unit == "g" || unit == "gb" || unit == "gib")
		mult = 1LL << 30;
	else
		return -1;
	if (n > LLONG_MAX / mult)
		return -1;
	return n * mult;
}

static void schedule(long long bytes, int iters_flag, int *warmup, int *iters) {
	if (iters_flag > 0)
		*iters = iters_flag, *warmup = std::max(1, iters_flag / 10);
	else if (bytes <= 64LL << 10)
		*warmup = 100, *iters = 1000;
	else if (bytes <= 1LL << 20)
		*warmup = 20, *iters = 200;
	else if (bytes <= 16LL << 20)
		*warmup = 5, *iters = 50;
	else
		*warmup = 2, *iters = 20;
}

static double now() {
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* oneccl_env sets what the ccl backend sets (see the top of the file). */
static void oneccl_env() {
	int local = env_int("LOCAL_RANK", 0), local_size = std::max(1, env_int("LOCAL_WORLD_SIZE", 1));
	setenv("CCL_ATL_TRANSPORT", "ofi", 0);
	setenv("CCL_PROCESS_LAUNCHER", "none", 0);
	setenv("CCL_LOCAL_RANK", std::to_string(local).c_str(), 0);
	setenv("CCL_LOCAL_SIZE", std::to_string(local_size).c_str(), 0);
	if (local_size > 1)
		setenv("CCL_ATL_SHM", "1", 0);
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int share = cpus >= online ? cpus / local_size : cpus; /* a shared mask is divided */
	int workers = std::max(1, env_int("CCL_WORKER_COUNT", 1));
	if (share <= workers)
		setenv("CCL_WORKER_OFFLOAD", "0", 0);
}

static ccl::shared_ptr_class<ccl::kvs> meet(const char *path) {
	if (nranks == 1)
		return ccl::create_main_kvs();
	if (!path || !*path)
		die("BK_CCL_KVS_FILE is not set: it names the file rank 0 leaves oneCCL's KVS address in");
	if (rank_ == 0) {
		auto kvs = ccl::create_main_kvs();
		auto a = kvs->get_address();
		std::string tmp = std::string(path) + ".tmp";
		FILE *f = fopen(tmp.c_str(), "wb");
		if (!f || fwrite(a.data(), 1, a.size(), f) != a.size() || fclose(f) != 0 || rename(tmp.c_str(), path) != 0)
			die(std::string("cannot write ") + path + ": " + strerror(errno));
		return kvs;
	}
	ccl::kvs::address_type a;
	for (double t0 = now();; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
		std::ifstream in(path, std::ios::binary);
		if (in && in.read(a.data(), a.size()) && in.gcount() == (std::streamsize)a.size())
			break;
		if (now() - t0 > 60)
			die(std::string("no KVS address in ") + path + " after 60 s");
	}
	return ccl::create_kvs(a);
}

template <class T>
static void fill(T *buf, size_t n, int r) {
	for (size_t i = 0; i < n; i++)
		buf[i] = (T)((double)(i % 1024 + 1) * (r + 1));
}

int main(int argc, char **argv) {
	rank_ = env_int("RANK", 0);
	nranks = std::max(1, env_int("WORLD_SIZE", 1));
	const char *label = nullptr;
	bool dbl = false;
	int iters_flag = 0;
	long long min_bytes = 8, max_bytes = 64LL << 20;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i], name = a, v;
		auto eq = a.find('=');
		if (a == "-h" || a == "--help") {
			if (rank_ == 0)
				printf("usage: ccl_bench [--dtype float32|float64] [--min-bytes SIZE] [--max-bytes SIZE] [--iters N] [--label TEXT]\n");
			return 0;
		}
		if (eq != std::string::npos)
			name = a.substr(0, eq), v = a.substr(eq + 1);
		else if (i + 1 < argc)
			v = argv[++i];
		else
			die("option " + a + " needs a value");
		if (name == "--dtype" && (v == "float32" || v == "float64"))
			dbl = v == "float64";
		else if (name == "--min-bytes" && (min_bytes = parse_size(v.c_str())) >= 0)
			;
		else if (name == "--max-bytes" && (max_bytes = parse_size(v.c_str())) >= 0)
			;
		else if (name == "--iters" && atoi(v.c_str()) > 0)
			iters_flag = atoi(v.c_str());
		else if (name == "--label" && v.find_first_of("\"\\") == std::string::npos)
			label = argv[i]; /* argv outlives main's loop; v does not */
		else
			die("bad option " + a + (v.empty() ? "" : " " + v));
		if (name == "--label" && eq != std::string::npos)
			label = argv[i] + eq + 1;
	}
	if (min_bytes < 1 || max_bytes < min_bytes)
		die("bad size range: want 1 <= min-bytes <= max-bytes");

	oneccl_env();
	ccl::init();
	auto kvs = meet(getenv("BK_CCL_KVS_FILE"));
	auto comm = ccl::create_communicator(nranks, rank_, kvs);

	const int esize = dbl ? 8 : 4;
	const auto dt = dbl ? ccl::datatype::float64 : ccl::datatype::float32;
	std::vector<long long> sizes;
	for (long long b = min_bytes; b > 0 && b <= max_bytes; b *= 2) {
		long long s = b / esize * esize;
		if (s > 0 && (sizes.empty() || sizes.back() != s))
			sizes.push_back(s);
		if (b > LLONG_MAX / 2)
			break;
	}
	if (sizes.empty())
		die("no message sizes to run");
	size_t max_n = (size_t)(sizes.back() / esize);
	void *send = nullptr, *recv = nullptr;
	if (posix_memalign(&send, 64, max_n * esize + 64) || posix_memalign(&recv, 64, max_n * esize + 64))
		die("out of memory");
	auto fillv = [&](size_t n) {
		if (dbl)
			fill((double *)send, n, rank_);
		else
			fill((float *)send, n, rank_);
	};
	auto allreduce = [&](size_t n) { ccl::allreduce(send, recv, n, dt, ccl::reduction::sum, comm).wait(); };

	/* Settle: the first size, untimed, in batches of 10, until every rank has
	 * run for 300 ms (bench.SettleTime). */
	{
		size_t n0 = (size_t)(sizes[0] / esize);
		fillv(n0);
		double t0 = now();
		for (int done = 0; !done;) {
			for (int it = 0; it < 10; it++)
				allreduce(n0);
			int mine = now() - t0 >= 0.3, all = 0;
			ccl::allreduce(&mine, &all, 1, ccl::reduction::min, comm).wait();
			done = all;
		}
	}

	for (long long bytes : sizes) {
		size_t n = (size_t)(bytes / esize);
		int warmup, iters;
		schedule(bytes, iters_flag, &warmup, &iters);
		fillv(n);
		for (int it = 0; it < warmup; it++)
			allreduce(n);
		ccl::barrier(comm).wait();
		double t0 = now();
		for (int it = 0; it < iters; it++)
			ccl::allreduce(send, recv, n, dt, ccl::reduction::sum, comm).wait();
		double mine = (now() - t0) / iters;

		double sum = 0, ext[2] = {mine, -mine}, mx[2];
		ccl::allreduce(&mine, &sum, 1, ccl::reduction::sum, comm).wait();
		ccl::allreduce(ext, mx, 2, ccl::reduction::max, comm).wait();
		double avg = sum / nranks, lo = -mx[1], hi = mx[0];
		double algbw = avg > 0 ? (double)bytes / avg / 1e9 : 0;
		double busbw = algbw * (nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1);
		if (rank_ == 0) {
			printf("{\"op\":\"allreduce\",\"backend\":\"c-ccl\",%s%s%s\"dtype\":\"%s\",\"ranks\":%d,\"bytes\":%lld,\"count\":%lld,"
			       "\"iters\":%d,\"warmup\":%d,\"avg_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,"
			       "\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f}\n",
			       label ? "\"label\":\"" : "", label ? label : "", label ? "\"," : "", dbl ? "float64" : "float32", nranks, bytes,
			       bytes / esize, iters, warmup, avg * 1e6, lo * 1e6, hi * 1e6, algbw, busbw);
			fflush(stdout);
		}
	}
	free(send);
	free(recv);
	return 0;
}
