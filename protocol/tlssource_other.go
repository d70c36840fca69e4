//go:build !linux

package protocol

import "net"

// lowaterOf: only Linux is known to honour SO_RCVLOWAT in poll; elsewhere
// a TLS connection reads as it comes.
func lowaterOf(net.Conn) lowater { return nil }
