//go:build !race

package workflow

const raceDetector = false
