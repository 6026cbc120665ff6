//go:build race

package codeworker

// raceBuild: the race detector's runtime reserves terabytes of shadow
// address space, and its allocator fails under an address-space limit.
const raceBuild = true
