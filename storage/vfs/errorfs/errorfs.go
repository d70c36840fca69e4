// Package errorfs is a fault-injecting vfs.FS for tests of package storage
// (pebble's vfs/errorfs habit): it passes every operation to an inner FS
// (the disk) and, where a Fault matches, fails it instead with an error
// such as EIO or ENOSPC, lets only a prefix of a write through (a short
// write), or tears a write and crashes.
//
// # The crash model
//
// The FS remembers, for every file opened for writing, its durable length:
// its length at its last Sync (or SyncMapping), lowered by every later
// truncation. A file created or truncated on open starts at 0; a file that
// existed before the FS first saw it starts at its length then. Crash stops
// the world: every later operation fails with ErrCrashed and reaches
// nothing. Restart then drops what was not made durable, by cutting every
// file to its durable length, and the FS works again for the next
// incarnation of the log. A torn write (Fault.Torn) puts its prefix on
// disk and crashes in the middle of the write. Since the model decides what
// survives, Sync and SyncMapping do not reach the inner FS (no real fsync:
// tests stay fast, and need not turn syncing off).
//
// What the model leaves out, on purpose: bytes overwritten below the
// durable length are not restored (the log only appends); directory
// operations (create, rename, remove) are durable at once; writes through
// a memory mapping never pass through the FS, so they all survive, as the
// kernel may write dirty mapped pages back at any time (what a mapping
// covers is cut to the durable length all the same). Reads through a
// mapping and sendfile(2) are not seen either: the fetch path sends a file
// of this FS with a plain read copy (vfs.OSFile), so read faults reach it.
package errorfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/sluice-io/sluice/storage/vfs"
)

// Op is a kind of operation a Fault applies to (a bit set).
type Op uint32

const (
	OpOpen     Op = 1 << iota // OpenFile
	OpRead                    // Read, ReadAt
	OpWrite                   // Write, WriteAt
	OpSync                    // Sync, SyncMapping
	OpTruncate                // Truncate of a file or a path
	OpMeta                    // Remove, RemoveAll, Rename, MkdirAll, Mkdir, ReadDir, Stat
	OpAll      = OpOpen | OpRead | OpWrite | OpSync | OpTruncate | OpMeta
)

// ErrCrashed is what every operation returns between Crash and Restart.
var ErrCrashed = errors.New("errorfs: the filesystem crashed")

// Fault says which operations fail and how.
type Fault struct {
	Ops Op
	// Match picks the files (by path); nil matches every file.
	Match func(path string) bool
	// After lets this many matching operations succeed first.
	After int
	// Times is how many operations fail before the fault stops matching;
	// 0 means every one until the fault is removed.
	Times int
	// Err is the error, wrapped in an *os.PathError (syscall.EIO when nil).
	Err error
	// Partial, for writes: this many bytes of the write reach the file
	// before the error (a disk filling up in the middle of a write).
	Partial int
	// Torn, for writes: Partial bytes of the write (none when 0) reach the
	// disk and the filesystem crashes (Crash) in the middle of it.
	Torn bool
}

// Suffix matches the paths ending in one of the suffixes.
func Suffix(suffixes ...string) func(string) bool {
	return func(p string) bool {
		for _, s := range suffixes {
			if strings.HasSuffix(p, s) {
				return true
			}
		}
		return false
	}
}

type fault struct {
	Fault
	seen, fired int
}

// FS is the fault-injecting filesystem. Safe for concurrent use.
type FS struct {
	inner vfs.FS

	mu      sync.Mutex
	faults  []*fault
	durable map[string]int64 // files opened for writing: their durable length
	crashed bool
	fired   int
}

var _ vfs.FS = (*FS)(nil)

// New returns an FS over inner (vfs.Default when nil) with no fault.
func New(inner vfs.FS) *FS {
	if inner == nil {
		inner = vfs.Default
	}
	return &FS{inner: inner, durable: map[string]int64{}}
}

// Inject adds a fault; the function returned removes it.
func (fs *FS) Inject(f Fault) (remove func()) {
	if f.Err == nil {
		f.Err = syscall.EIO
	}
	ft := &fault{Fault: f}
	fs.mu.Lock()
	fs.faults = append(fs.faults, ft)
	fs.mu.Unlock()
	return func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for i, x := range fs.faults {
			if x == ft {
				fs.faults = append(fs.faults[:i], fs.faults[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every fault.
func (fs *FS) Clear() {
	fs.mu.Lock()
	fs.faults = nil
	fs.mu.Unlock()
}

// Fired is how many operations the faults failed so far.
func (fs *FS) Fired() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fired
}

// Crash stops the filesystem: every later operation fails with ErrCrashed
// and nothing more reaches the disk through it, until Restart.
func (fs *FS) Crash() {
	fs.mu.Lock()
	fs.crashed = true
	fs.mu.Unlock()
}

// Crashed reports whether the FS crashed (Crash or a torn write).
func (fs *FS) Crashed() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.crashed
}

// Restart drops everything that was not made durable (see the package
// comment), removes every fault and lets operations through again. Call it
// once whatever used the FS before the crash is closed.
func (fs *FS) Restart() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for p, n := range fs.durable {
		st, err := fs.inner.Stat(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			delete(fs.durable, p)
			continue
		}
		if st.Mode().IsRegular() && st.Size() > n {
			errs = append(errs, fs.inner.Truncate(p, n))
		}
	}
	fs.crashed = false
	fs.faults = nil
	return errors.Join(errs...)
}

// DurableSize is the length name would keep through a crash, and whether
// the FS tracks it (tests).
func (fs *FS) DurableSize(name string) (int64, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, ok := fs.durable[filepath.Clean(name)]
	return n, ok
}

// check returns the error an operation gets (ErrCrashed, or a fault's),
// and the fault that fired, if any.
func (fs *FS) check(op Op, name string) (*fault, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.crashed {
		return nil, ErrCrashed
	}
	for _, f := range fs.faults {
		if f.Ops&op == 0 || f.Match != nil && !f.Match(name) || f.Times > 0 && f.fired >= f.Times {
			continue
		}
		f.seen++
		if f.seen <= f.After {
			continue
		}
		f.fired++
		fs.fired++
		return f, f.Err
	}
	return nil, nil
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: name, Err: err}
}

// lower sets name's durable length to at most n (tracking it from now on).
func (fs *FS) lower(name string, n int64) {
	fs.mu.Lock()
	if d, ok := fs.durable[name]; !ok || n < d {
		fs.durable[name] = n
	}
	fs.mu.Unlock()
}

// synced records name's current length as durable.
func (fs *FS) synced(name string) {
	st, err := fs.inner.Stat(name)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	fs.mu.Lock()
	if _, ok := fs.durable[name]; ok {
		fs.durable[name] = st.Size()
	}
	fs.mu.Unlock()
}

func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	name = filepath.Clean(name)
	if _, err := fs.check(OpOpen, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	var before int64 = -1
	if writable && flag&os.O_TRUNC == 0 {
		if st, err := fs.inner.Stat(name); err == nil {
			before = st.Size()
		}
	}
	f, err := fs.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if writable {
		fs.mu.Lock()
		_, known := fs.durable[name]
		switch {
		case flag&os.O_TRUNC != 0 || before < 0:
			fs.durable[name] = 0 // truncated or created now
		case !known:
			fs.durable[name] = before
		}
		fs.mu.Unlock()
	}
	return &file{fs: fs, name: name, f: f}, nil
}

func (fs *FS) meta(op, name string) error {
	_, err := fs.check(OpMeta, name)
	return pathErr(op, name, err)
}

func (fs *FS) Remove(name string) error {
	name = filepath.Clean(name)
	if err := fs.meta("remove", name); err != nil {
		return err
	}
	err := fs.inner.Remove(name)
	if err == nil {
		fs.forget(name)
	}
	return err
}

func (fs *FS) RemoveAll(path string) error {
	path = filepath.Clean(path)
	if err := fs.meta("removeall", path); err != nil {
		return err
	}
	err := fs.inner.RemoveAll(path)
	if err == nil {
		fs.forget(path)
	}
	return err
}

// forget drops the tracking of name and of everything below it.
func (fs *FS) forget(name string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for p := range fs.durable {
		if p == name || strings.HasPrefix(p, name+string(filepath.Separator)) {
			delete(fs.durable, p)
		}
	}
}

func (fs *FS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	if err := fs.meta("rename", oldpath); err != nil {
		return err
	}
	if err := fs.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for p := range fs.durable {
		if p == newpath || strings.HasPrefix(p, newpath+string(filepath.Separator)) {
			delete(fs.durable, p)
		}
	}
	for p, n := range fs.durable {
		if p == oldpath {
			fs.durable[newpath] = n
			delete(fs.durable, p)
		} else if rest, ok := strings.CutPrefix(p, oldpath+string(filepath.Separator)); ok {
			fs.durable[filepath.Join(newpath, rest)] = n
			delete(fs.durable, p)
		}
	}
	return nil
}

func (fs *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := fs.meta("readdir", name); err != nil {
		return nil, err
	}
	return fs.inner.ReadDir(name)
}

func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	if err := fs.meta("mkdir", path); err != nil {
		return err
	}
	return fs.inner.MkdirAll(path, perm)
}

func (fs *FS) Mkdir(path string, perm os.FileMode) error {
	if err := fs.meta("mkdir", path); err != nil {
		return err
	}
	return fs.inner.Mkdir(path, perm)
}

func (fs *FS) Stat(name string) (os.FileInfo, error) {
	if err := fs.meta("stat", name); err != nil {
		return nil, err
	}
	return fs.inner.Stat(name)
}

func (fs *FS) Truncate(name string, size int64) error {
	name = filepath.Clean(name)
	if _, err := fs.check(OpTruncate, name); err != nil {
		return pathErr("truncate", name, err)
	}
	if _, ok := fs.DurableSize(name); !ok {
		if st, err := fs.inner.Stat(name); err == nil {
			fs.lower(name, st.Size())
		}
	}
	if err := fs.inner.Truncate(name, size); err != nil {
		return err
	}
	fs.lower(name, size)
	return nil
}

func (fs *FS) SyncMapping(name string, data []byte) error {
	name = filepath.Clean(name)
	if _, err := fs.check(OpSync, name); err != nil {
		return pathErr("msync", name, err)
	}
	fs.synced(name)
	return nil
}

// file is a File of the FS: the inner file behind the same checks.
type file struct {
	fs   *FS
	name string
	f    vfs.File
}

func (f *file) Name() string { return f.f.Name() }

// Fd is the inner file's: mappings and locks bypass the seam.
func (f *file) Fd() uintptr { return f.f.Fd() }

func (f *file) Stat() (os.FileInfo, error) {
	if err := f.fs.meta("stat", f.name); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

// Close always closes the inner file (its descriptor and lock go, even
// after a crash).
func (f *file) Close() error {
	err := f.f.Close()
	if f.fs.Crashed() {
		return nil
	}
	return err
}

func (f *file) Read(p []byte) (int, error) {
	if _, err := f.fs.check(OpRead, f.name); err != nil {
		return 0, pathErr("read", f.name, err)
	}
	return f.f.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if _, err := f.fs.check(OpRead, f.name); err != nil {
		return 0, pathErr("read", f.name, err)
	}
	return f.f.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	return f.write(p, -1)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	return f.write(p, off)
}

// write writes p at off (-1: at the file offset) unless a fault says
// otherwise.
func (f *file) write(p []byte, off int64) (int, error) {
	ft, err := f.fs.check(OpWrite, f.name)
	if err == nil {
		if off < 0 {
			return f.f.Write(p)
		}
		return f.f.WriteAt(p, off)
	}
	if ft == nil || ft.Partial <= 0 && !ft.Torn {
		return 0, pathErr("write", f.name, err)
	}
	k := max(min(ft.Partial, len(p)), 0)
	var n int
	var werr error
	switch {
	case k == 0:
	case off < 0:
		n, werr = f.f.Write(p[:k])
	default:
		n, werr = f.f.WriteAt(p[:k], off)
	}
	if werr != nil {
		return n, werr
	}
	if ft.Torn {
		// The prefix is on disk; the power goes.
		f.fs.synced(f.name)
		f.fs.Crash()
		return n, pathErr("write", f.name, ErrCrashed)
	}
	return n, pathErr("write", f.name, err)
}

func (f *file) Sync() error {
	if _, err := f.fs.check(OpSync, f.name); err != nil {
		return pathErr("sync", f.name, err)
	}
	f.fs.synced(f.name)
	return nil
}

func (f *file) Truncate(size int64) error {
	if _, err := f.fs.check(OpTruncate, f.name); err != nil {
		return pathErr("truncate", f.name, err)
	}
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	f.fs.lower(f.name, size)
	return nil
}

var _ io.ReaderAt = (*file)(nil)
