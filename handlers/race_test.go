//go:build race

package handlers

// raceEnabled: the race detector is on, and with it allocation counts are
// not what a build without it makes (sync.Pool drops items, escape analysis
// differs).
const raceEnabled = true
