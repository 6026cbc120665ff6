// Package wire converts between the domain's values and the generated
// request and response types of openapi.yaml (gen), one file per resource,
// without JSON round trips: what the handlers send is built here field by
// field, and request settings are read into domain types here.
package wire

// ValueOf returns what p points to, or the zero value for nil.
func ValueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// eachOf converts every element of list with f; a nil list stays nil
// (null on the wire), an empty one empty.
func eachOf[T, W any](list []T, f func(*T) W) []W {
	if list == nil {
		return nil
	}
	out := make([]W, len(list))
	for i := range list {
		out[i] = f(&list[i])
	}
	return out
}

// ValueOr returns what p points to, or def for nil: a query parameter
// with its default.
func ValueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
