//go:build !race

package handlers_test

// raceDetector is true when the tests run with -race.
const raceDetector = false
