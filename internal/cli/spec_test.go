package cli

import "os"

// The root main package embeds openapi.yaml and hands it to Main; the
// tests of this package read the same file.
func init() {
	b, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		panic(err)
	}
	specYAML = b
}
