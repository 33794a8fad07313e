//go:build (mpi || mpich) && !(mpi && mpich)

package mpi

// Its own small preamble, apart from mpi.go's: the library's version is a
// fact of the library loaded at run time (Intel MPI's libmpi.so.12 under a
// binary built against MPICH's headers, say), not of the build tag.

/*
#include <mpi.h>
static char bk_libver[MPI_MAX_LIBRARY_VERSION_STRING];
// MPI_Get_library_version may be called before MPI_Init (MPI-3).
static const char *bk_library_version(void) {
	int n = 0;
	if (MPI_Get_library_version(bk_libver, &n) != MPI_SUCCESS) return "";
	return bk_libver;
}
*/
import "C"

import "strings"

// LibraryVersion is the first line of MPI_Get_library_version of the MPI
// library this process loaded, e.g. "Intel(R) MPI Library 2021.18.1 for
// Linux* OS" or "Open MPI v4.1.4, package: ...": what Library, the build
// tag's ABI family, does not say.
func LibraryVersion() string {
	s := C.GoString(C.bk_library_version())
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
