package protocol

import (
	"net"
	"strings"
	"sync"
	"syscall"
)

// sockLowat sets SO_RCVLOWAT: epoll reports the socket readable only once
// that many bytes are queued (a read still returns what is there).
type sockLowat struct{ rc syscall.RawConn }

// lowatKernel: Linux 4.18 and later grow the receive buffer to hold the
// low-water mark (tcp_set_rcvlowat; before, a mark above the buffer's
// window could stall the connection), so the mark is used only there.
var lowatKernel = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return false
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return kernelAtLeast(b.String(), 4, 18)
})

func lowaterOf(nc net.Conn) lowater {
	if !lowatKernel() {
		return nil
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return sockLowat{rc}
}

func (s sockLowat) setLowat(n int) error {
	var serr error
	err := s.rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	})
	if err != nil {
		return err
	}
	return serr
}
