package handlers

// valueOf returns what p points to, or the zero value for nil.
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// wireEach converts every element of list with f; a nil list stays nil
// (null on the wire), an empty one empty.
func wireEach[T, W any](list []T, f func(*T) W) []W {
	if list == nil {
		return nil
	}
	out := make([]W, len(list))
	for i := range list {
		out[i] = f(&list[i])
	}
	return out
}

// valueOr returns what p points to, or def for nil: a query parameter
// with its default.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
