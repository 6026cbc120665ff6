package codeworker

import "sync"

// textCache keeps what is built from a source text (compiled code, parsed
// templates): a workflow runs the same texts on every run, and building
// them again was a few percent of a short run. It holds up to size values
// and, when full, forgets one at random. What it keeps must be safe to use
// by several runs at once. Texts that fail to build are not kept.
type textCache[T any] struct {
	size int
	mu   sync.Mutex
	m    map[string]T
}

// get returns the value built from text, building it on first use.
func (c *textCache[T]) get(text string, build func(string) (T, error)) (T, error) {
	c.mu.Lock()
	v, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := build(text)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]T)
	}
	if len(c.m) >= c.size {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[text] = v
	return v, nil
}
