//go:build !race

package codeworker

const raceBuild = false
