// Package gen is generated from openapi.yaml by oapi-codegen (see
// oapi-config.yaml); run `make generate` after changing the description and
// never edit api.gen.go by hand.
package gen

//go:generate go tool oapi-codegen -config ../oapi-config.yaml ../openapi.yaml
