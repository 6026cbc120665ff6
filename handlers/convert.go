package handlers

// valueOf returns what p points to, or the zero value for nil.
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// valueOr returns what p points to, or def for nil: a query parameter
// with its default.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
