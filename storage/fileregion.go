package storage

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/storage/vfs"
)

// FileRegion is a run of whole batches inside one segment file.
type FileRegion struct {
	File     vfs.File
	Pos, Len int64
}

// maxSendfileChunk bounds one sendfile call (Linux moves at most ~2 GiB).
const maxSendfileChunk = 1 << 30

// WriteTo writes the region to w. When w exposes a file descriptor
// (*net.TCPConn, *net.UnixConn, *os.File) the bytes go with sendfile(2) and
// an explicit offset: they move from the page cache to the socket without
// passing through user space, and the file's shared offset is untouched, so
// any number of readers may send from the same *os.File at once. (Go's own
// TCPConn.ReadFrom also uses sendfile but from the file's current offset,
// which concurrent fetches would race on.) Other writers (TLS, buffers) get
// a plain copy through io.SectionReader, and so does a File that is not an
// *os.File (a test's fault-injecting filesystem, vfs.OSFile).
func (r *FileRegion) WriteTo(w io.Writer) (int64, error) {
	if r.Len <= 0 {
		return 0, nil
	}
	if sc, ok := w.(syscall.Conn); ok {
		if n, handled, err := r.sendfile(sc); handled {
			return n, err
		} else if n > 0 {
			// Fell back part way: copy the rest.
			m, err := io.Copy(w, io.NewSectionReader(r.File, r.Pos+n, r.Len-n))
			return n + m, err
		}
	}
	return io.Copy(w, io.NewSectionReader(r.File, r.Pos, r.Len))
}

// sendfile sends the region; handled is false when the destination does not
// support sendfile (then nothing or a prefix was sent).
func (r *FileRegion) sendfile(dst syscall.Conn) (written int64, handled bool, err error) {
	rc, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	of, ok := vfs.OSFile(r.File)
	if !ok {
		return 0, false, nil
	}
	src, err := of.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var srcFD int
	if err := src.Control(func(fd uintptr) { srcFD = int(fd) }); err != nil {
		return 0, false, nil
	}
	off := r.Pos
	end := r.Pos + r.Len
	handled = true
	var serr error
	werr := rc.Write(func(dstFD uintptr) bool {
		for off < end {
			n, err := unix.Sendfile(int(dstFD), srcFD, &off, int(min(end-off, maxSendfileChunk)))
			if n > 0 {
				written += int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket is writable
			case err == unix.EINTR:
				continue
			case err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
				handled = false
				return true
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = io.ErrUnexpectedEOF // the file shrank under us
				return true
			}
		}
		return true
	})
	if !handled {
		return written, false, nil
	}
	if serr == nil {
		serr = werr
	}
	if serr != nil && !errors.Is(serr, io.ErrUnexpectedEOF) {
		serr = &os.SyscallError{Syscall: "sendfile", Err: serr}
	}
	return written, true, serr
}
