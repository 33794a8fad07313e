// Command batchkit launches distributed training on Slurm and MPI clusters.
package main

import "os"

func main() { os.Exit(Main(os.Args, os.Stdout, os.Stderr)) }
