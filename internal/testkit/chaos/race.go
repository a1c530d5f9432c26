//go:build race

package chaos

// raceEnabled reports whether this binary was built with the race detector: the zkd binary under
// test is then built with -race too, and a race report in its log fails the run.
const raceEnabled = true
