//go:build !linux

package tcp

import (
	"errors"
	"sync/atomic"
	"time"
)

// Shared-memory links are Linux only; elsewhere every link is TCP.
const shmSupported = false

type shmFile struct {
	name  string
	nonce []byte
	mem   []byte
}

func createShm(int) (*shmFile, error)                 { return nil, errors.New("no shared memory links on this OS") }
func (f *shmFile) remove()                            {}
func openShm(string) ([]byte, error)                  { return nil, errors.New("no shared memory links on this OS") }
func unmapShm([]byte)                                 {}
func sweepShm(time.Time)                              {}
func futexWait(*atomic.Uint32, uint32, time.Duration) {}
func futexWake(*atomic.Uint32)                        {}
