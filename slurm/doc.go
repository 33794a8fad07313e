// Package slurm turns the compressed node and task layout that Slurm hands
// a job (SLURM_JOB_NODELIST=gpu[01-04],cpu7, SLURM_TASKS_PER_NODE=2(x3),1)
// into the plain, ordered lists a launcher needs to place ranks, checks a
// step's shape (Shape), and writes and submits batch scripts. It reads no
// environment: package detect reads SLURM_* and decides whether Slurm
// started the process.
//
// It is a reimplementation rather than a call to `scontrol show hostnames`
// because launch code also runs where scontrol or slurm.conf is missing
// (containers, login-less compute images) and because forking scontrol per
// rank is slow. Because of that, the parser follows Slurm 22.05's
// src/common/hostlist.c result for result on every input it accepts, and the
// tests compare it against the real scontrol. Where Slurm quietly accepts
// garbage (an unclosed '[', whitespace inside brackets, overflowing numbers)
// this package returns an error instead: every expression scontrol rejects
// is rejected here too, but not the other way round.
//
// See ExampleExpandHostlist and ExampleParseTasksPerNode for the typical use.
package slurm
