//go:build !race

package handlers

// raceEnabled: the race detector is off (race_test.go).
const raceEnabled = false
