package mpirun

import "path/filepath"

// slurmLibDirs are where Slurm's libraries are installed, after the lib
// directories next to srun's bin: Debian's multiarch directory, then the
// RPM and source-build layouts.
var slurmLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}

// SrunLibEnv is what ranks of flavor f started directly by srun through
// plugin (--mpi; "" is the flavor's default) need to find a library of
// Slurm's, e.g. I_MPI_PMI_LIBRARY=.../libpmi2.so.0 for Intel MPI under
// pmi2: the first of the library's files that exists in srun's ../lib or
// ../lib64 (srun is srun's path, "" when unknown) or in slurmLibDirs. It
// is nil when the flavor needs none or no file is found (the launch then
// fails as it would have; doctor names the library). A value the user or
// the profile set wins: the caller puts this under both.
func SrunLibEnv(f Flavor, plugin, srun string, exists func(string) bool) map[string]string {
	if plugin == "" {
		plugin = DefaultSrunMPI(f)
	}
	lib, ok := flavorRows[f].srunLibs[plugin]
	if !ok {
		return nil
	}
	dirs := slurmLibDirs
	if srun != "" {
		root := filepath.Dir(filepath.Dir(srun))
		dirs = append([]string{filepath.Join(root, "lib"), filepath.Join(root, "lib64")}, dirs...)
	}
	for _, d := range dirs {
		for _, name := range lib.files {
			if p := filepath.Join(d, name); exists(p) {
				return map[string]string{lib.name: p}
			}
		}
	}
	return nil
}
