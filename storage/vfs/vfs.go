// Package vfs is the filesystem seam of package storage: every file the log
// opens, writes, syncs, renames or removes goes through an FS, so tests can
// put a fault-injecting one (package errorfs) between the log and the disk
// (pebble's vfs habit).
//
// The seam costs nothing on the hot paths. Default returns the *os.File
// itself as the File (no wrapper, no allocation): an append is one interface
// call to (*os.File).WriteAt. Two things the log does bypass the seam on
// purpose and reach the file descriptor (File.Fd): memory maps (the indexes,
// and the read-only map of a segment used to read batch headers) and
// sendfile(2) on the fetch path. A File that is not an *os.File (OSFile
// reports it) is sent with a plain read copy instead of sendfile, so faults
// injected on reads reach the fetch path too. Writes to a mapping are made
// durable with FS.SyncMapping, so a fault-injecting FS sees them.
package vfs

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// File is an open file: the subset of *os.File the log uses.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Name() string
	Stat() (os.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	// Fd is the descriptor, for mmap and flock; the caller keeps the File
	// open while it uses it.
	Fd() uintptr
}

// FS is what the log does to a filesystem.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(path string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(path string, perm os.FileMode) error
	// Mkdir creates one directory; it fails (os.ErrExist) when the name
	// exists. The log creates a new partition directory with it, so it
	// knows the directory is empty.
	Mkdir(path string, perm os.FileMode) error
	Stat(name string) (os.FileInfo, error)
	Truncate(name string, size int64) error
	// SyncMapping makes the writes to data, a shared read-write mapping of
	// the file name, durable (msync MS_SYNC).
	SyncMapping(name string, data []byte) error
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Mkdir(path string, perm os.FileMode) error    { return os.Mkdir(path, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (osFS) Truncate(name string, size int64) error       { return os.Truncate(name, size) }

func (osFS) SyncMapping(name string, data []byte) error {
	if err := unix.Msync(data, unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: name, Err: err}
	}
	return nil
}

// OSFile returns the *os.File behind f when f is one (the Default FS's
// files): the fetch path sends such a file with sendfile(2).
func OSFile(f File) (*os.File, bool) {
	of, ok := f.(*os.File)
	return of, ok
}

// Open opens name read-only.
func Open(fs FS, name string) (File, error) { return fs.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads the whole file, as os.ReadFile.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := Open(fs, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		size = int(st.Size())
	}
	buf := make([]byte, 0, size+512)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// Exists reports whether name can be stat'ed.
func Exists(fs FS, name string) bool {
	_, err := fs.Stat(name)
	return err == nil
}
