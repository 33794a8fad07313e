//go:build linux

package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const shmSupported = true

// shmDir is where the link files live: tmpfs on every Linux distribution.
var shmDir = "/dev/shm"

const shmPrefix = "batchkit-"

// shmFile is a link file its creator has mapped; remove unlinks it once the
// peer has mapped it too (or refused), and unmaps it unless a link kept it.
type shmFile struct {
	name  string // base name under shmDir
	nonce []byte
	mem   []byte
}

func createShm(ringBytes int) (*shmFile, error) {
	var rnd [16 + shmNonceSz]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d-%s", shmPrefix, os.Getpid(), hex.EncodeToString(rnd[:16]))
	path := filepath.Join(shmDir, name)
	// O_EXCL and 0600: the file is new and ours; only our user may map it.
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	size := shmSize(ringBytes)
	f := &shmFile{name: name, nonce: rnd[16:]}
	// Allocate every page now: a full tmpfs (Docker's /dev/shm is 64 MiB)
	// then fails here, and the link stays on TCP, instead of killing the
	// process with SIGBUS when a page of the mapping is first touched.
	if err := syscall.Fallocate(fd, 0, 0, int64(size)); err != nil {
		f.remove()
		return nil, &os.PathError{Op: "allocate", Path: path, Err: err}
	}
	mem, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.remove()
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	f.mem = mem
	copy(mem, shmMagic)
	copy(mem[shmNonceAt:], f.nonce)
	binary.NativeEndian.PutUint64(mem[shmCapAt:], uint64(ringBytes))
	return f, nil
}

func (f *shmFile) remove() {
	os.Remove(filepath.Join(shmDir, f.name))
	if f.mem != nil {
		unmapShm(f.mem)
		f.mem = nil
	}
}

// shmSweepAge is how old a dead creator's link file must be to be removed.
// A link file lives from its creation to its peer's reply, bounded by the
// rendezvous: the age guards a creator in another pid namespace that shares
// this /dev/shm and so looks dead here.
const shmSweepAge = time.Minute

// sweepShm removes the link files this user's processes left behind when
// they died between creating a file and its peer's reply (SIGKILL, or a
// SIGTERM nothing handled): the creator's pid, which the name carries, is
// gone. Each such file holds a few MiB of RAM until someone removes it.
func sweepShm(now time.Time) {
	entries, err := os.ReadDir(shmDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), shmPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		// ESRCH only: EPERM means alive (another user's).
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < shmSweepAge {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() || !info.Mode().IsRegular() {
			continue
		}
		os.Remove(filepath.Join(shmDir, e.Name()))
	}
}

// openShm maps a link file a peer created.
func openShm(name string) ([]byte, error) {
	if !strings.HasPrefix(name, shmPrefix) || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("refusing the file name %q", name)
	}
	path := filepath.Join(shmDir, name)
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s: not private to this user", path)
	}
	if st.Size < shmPage || st.Size > 1<<40 {
		return nil, fmt.Errorf("%s: %d bytes", path, st.Size)
	}
	mem, err := syscall.Mmap(fd, 0, int(st.Size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return mem, nil
}

func unmapShm(mem []byte) { syscall.Munmap(mem) }

const (
	futexWaitOp = 0 // FUTEX_WAIT, not _PRIVATE: the word is shared between processes
	futexWakeOp = 1
)

// futexWait sleeps while *w == val, for at most d (or until woken).
func futexWait(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on w (there is at most one).
func futexWake(w *atomic.Uint32) {
	syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, 1<<30, 0, 0, 0)
}
