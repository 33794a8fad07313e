// Package envsetup owns what a rank's environment gets: the torchrun
// contract of its topology, the rendezvous, the job token and batchkit
// run's attempt variables, the changes of the site's environment scripts
// (oneAPI's setvars.sh, oneCCL's env/vars.sh), the profile's variables and
// per-rank pinning. RankEnv computes it as a pure function with one
// precedence rule (see rank.go); LaunchEnv computes what every rank of an
// MPI launch shares. The variable names are in package envvars.
//
// Go cannot source a shell script, so Source runs real bash, sources the
// scripts in order and reads back the environment; the difference is a
// Changes value. Everything else is pure: Diff computes changes from two
// environments, Apply applies them to an environ list, and WithVars layers a
// profile's variables over sourced changes (a value the user exported
// before wins, as in the batch template).
//
// See ExamplePinning and ExampleDeviceAffinity for a rank's pinning and GPU.
package envsetup
