//go:build race

package workflow

// raceDetector is true under -race.
const raceDetector = true
