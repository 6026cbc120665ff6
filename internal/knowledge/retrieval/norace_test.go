//go:build !race

package retrieval_test

const raceDetector = false
