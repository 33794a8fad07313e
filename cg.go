package cg

/*
#cgo nocallback nop
static int nop(int x) { return x + 1; }
*/
import "C"

func Nop(x int) int { return int(C.nop(C.int(x))) }
