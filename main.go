// Command appkb serves the Application and Knowledge Base HTTP API (the API
// Dify calls its Service API). Everything it does lives under internal/; the
// command line itself is internal/cli.
package main

import (
	_ "embed"

	"appkb/internal/cli"
)

//go:embed openapi.yaml
var spec []byte

func main() { cli.Main(spec) }
