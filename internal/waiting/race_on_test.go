//go:build race

package waiting

// raceEnabled: the test binary is built with -race.
const raceEnabled = true
