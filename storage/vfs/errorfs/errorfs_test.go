package errorfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluice-io/sluice/storage/vfs"
)

func size(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestFaultCounting(t *testing.T) {
	fs := New(nil)
	p := filepath.Join(t.TempDir(), "a.log")
	f, err := fs.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs.Inject(Fault{Ops: OpWrite, Match: Suffix(".log"), After: 2, Times: 2, Err: syscall.ENOSPC})
	var errs []error
	for i := 0; i < 5; i++ {
		_, err := f.Write([]byte("x"))
		errs = append(errs, err)
	}
	for i, err := range errs {
		failed := i == 2 || i == 3
		if failed != (err != nil) || failed && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write %d: %v", i, err)
		}
		var pe *os.PathError
		if failed && (!errors.As(err, &pe) || pe.Path != p) {
			t.Fatalf("write %d: %v is not a PathError naming the file", i, err)
		}
	}
	if fs.Fired() != 2 || size(t, p) != 3 {
		t.Fatalf("fired %d, size %d", fs.Fired(), size(t, p))
	}
	// Reads and other files are not matched.
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatal(err)
	}
	other, err := fs.OpenFile(p+".index", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	remove := fs.Inject(Fault{Ops: OpRead | OpSync, Match: Suffix(".log")})
	if _, err := other.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read: %v, want EIO (the default error)", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v, want EIO", err)
	}
	remove()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestPartialWrite(t *testing.T) {
	fs := New(nil)
	p := filepath.Join(t.TempDir(), "a.log")
	f, _ := fs.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	defer f.Close()
	fs.Inject(Fault{Ops: OpWrite, Partial: 3, Times: 1, Err: syscall.ENOSPC})
	n, err := f.WriteAt([]byte("abcdef"), 0)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) || fs.Crashed() {
		t.Fatalf("short write: %d %v (crashed %v)", n, err, fs.Crashed())
	}
	if b, _ := os.ReadFile(p); string(b) != "abc" {
		t.Fatalf("file holds %q", b)
	}
}

// TestCrashModel: what survives Restart is each file as of its last sync,
// lowered by later truncations; a torn write keeps its prefix.
func TestCrashModel(t *testing.T) {
	fs := New(nil)
	dir := t.TempDir()
	synced := filepath.Join(dir, "synced")
	never := filepath.Join(dir, "never")
	cut := filepath.Join(dir, "cut")
	moved := filepath.Join(dir, "moved")
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("before the fs"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(p string, flag int, b []byte, sync bool) vfs.File {
		f, err := fs.OpenFile(p, flag|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	f := write(synced, os.O_CREATE, []byte("0123456789"), true)
	f.Write([]byte("lost"))
	f.Close()
	write(never, os.O_CREATE, []byte("never synced"), false).Close()
	f = write(cut, os.O_CREATE, []byte("0123456789"), true)
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("xx"))
	f.Close()
	write(moved+".tmp", os.O_CREATE, []byte("renamed"), true).Close()
	if err := fs.Rename(moved+".tmp", moved); err != nil {
		t.Fatal(err)
	}
	write(old, os.O_APPEND, []byte(" and after"), false).Close()

	torn := filepath.Join(dir, "torn")
	tf := write(torn, os.O_CREATE, []byte("head-"), false)
	fs.Inject(Fault{Ops: OpWrite, Match: Suffix("torn"), Partial: 2, Torn: true})
	if _, err := tf.Write([]byte("body")); !errors.Is(err, ErrCrashed) || !fs.Crashed() {
		t.Fatalf("torn write: %v", err)
	}
	// Crashed: nothing reaches the disk, every operation fails.
	if _, err := tf.Write([]byte("more")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after the crash: %v", err)
	}
	if _, err := fs.OpenFile(filepath.Join(dir, "new"), os.O_CREATE|os.O_WRONLY, 0o644); !errors.Is(err, ErrCrashed) {
		t.Fatalf("open after the crash: %v", err)
	}
	if err := fs.Remove(synced); !errors.Is(err, ErrCrashed) {
		t.Fatalf("remove after the crash: %v", err)
	}
	tf.Close()
	if err := fs.Restart(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		synced: "0123456789",
		never:  "",
		cut:    "0123",
		moved:  "renamed",
		old:    "before the fs",
		torn:   "head-bo",
	} {
		got, err := vfs.ReadFile(fs, p)
		if err != nil || !bytes.Equal(got, []byte(want)) {
			t.Errorf("%s after the crash: %q %v, want %q", filepath.Base(p), got, err, want)
		}
	}
	if _, err := fs.OpenFile(filepath.Join(dir, "new"), os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
		t.Fatalf("open after Restart: %v", err)
	}
}

// TestDefaultIsOS: the default FS hands out the *os.File itself (sendfile
// and mmap see the real file), and errorfs's files are not one.
func TestDefaultIsOS(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := vfs.OSFile(f); !ok {
		t.Fatal("vfs.Default's file is not an *os.File")
	}
	g, err := New(nil).OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := vfs.OSFile(g); ok {
		t.Fatal("errorfs's file passes for an *os.File")
	}
	if g.Fd() != g.(*file).f.Fd() {
		t.Fatal("Fd is not the inner file's")
	}
	if _, err := vfs.Default.OpenFile(filepath.Join(p, "missing"), os.O_RDONLY, 0); err == nil {
		t.Fatal("open of a missing file succeeded")
	}
}
