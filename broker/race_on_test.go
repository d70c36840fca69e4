//go:build race

package broker

// raceEnabled: the race detector's instrumentation makes some values escape
// to the heap, so allocation counts do not hold under it.
const raceEnabled = true
