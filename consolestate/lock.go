package consolestate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// FileLock is the console write lock of a single node: one holder in the
// process at a time, and an flock on a file in console.data.dir shared
// with other processes on the host (sluice console user). In a cluster the
// lock is a ZooKeeper node instead (the appliance's).
type FileLock struct {
	path string
	ch   chan struct{}
}

// NewFileLock returns the lock on path (created 0600 when missing).
func NewFileLock(path string) *FileLock { return &FileLock{path: path, ch: make(chan struct{}, 1)} }

// Lock implements consoledb.Lock.
func (l *FileLock) Lock(ctx context.Context) (func(), error) {
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		<-l.ch
		return nil, fmt.Errorf("console lock %s: %w", l.path, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			<-l.ch
			return nil, fmt.Errorf("console lock %s: %w", l.path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			<-l.ch
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
			<-l.ch
		})
	}, nil
}
