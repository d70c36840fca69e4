package protocol

// SetTLSLowWater turns the TLS low-water mark on or off for connections
// accepted from now on (tlssource.go), for benchmarks.
func SetTLSLowWater(on bool) { tlsLowWater.Store(on) }
