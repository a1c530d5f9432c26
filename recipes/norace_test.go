//go:build !race

package recipes

// raceEnabled reports that the race detector is on.
const raceEnabled = false
