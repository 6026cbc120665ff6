//go:build race

package retrieval_test

// raceDetector is true under -race, which makes indexing and search
// several times slower.
const raceDetector = true
