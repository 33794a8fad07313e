// Package envsetup owns what a rank's environment gets beyond the torchrun
// contract: the changes of the site's environment scripts (oneAPI's
// setvars.sh, oneCCL's env/vars.sh), the profile's variables over them, and
// (later) per-rank pinning variables.
//
// Go cannot source a shell script, so Source runs real bash, sources the
// scripts in order and reads back the environment; the difference is a
// Changes value. Everything else is pure: Diff computes changes from two
// environments, Apply applies them to an environ list, and WithVars layers a
// profile's variables over sourced changes with batchkit's one precedence
// rule (a value the user exported before wins, as in the batch template).
package envsetup
