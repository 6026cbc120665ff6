// Package vecindex is an approximate nearest-neighbour index for cosine
// similarity: an inverted file (IVF) over a spherical k-means clustering.
//
// Vectors are grouped around nlist centroids. A query is compared with the
// centroids and only the vectors of the nprobe nearest clusters are scored,
// so a search reads a fraction of the vectors instead of all of them. The
// index holds only cluster assignments (vector numbers); the vectors stay
// with the caller, who scores the candidates it is given exactly.
package vecindex

import (
	"math"
	"math/rand/v2"
	"sort"
)

// IVF is a built index. It is immutable and safe for concurrent use.
type IVF struct {
	dims      int
	nlist     int
	centroids []float32 // nlist × dims, unit length
	lists     [][]int32 // vector numbers per cluster
}

// Options tune Build; zero values pick defaults.
type Options struct {
	// Lists is the number of clusters (default √n, at least 1).
	Lists int
	// Iterations of k-means (default 8).
	Iterations int
	// Sample bounds how many vectors train the centroids (default 64 per
	// cluster); every vector is then assigned.
	Sample int
	Seed   uint64
}

// Build clusters the n = len(vecs)/dims vectors of vecs (row after row).
// Zero vectors land in some cluster and score 0 anyway.
func Build(vecs []float32, dims int, opt Options) *IVF {
	n := 0
	if dims > 0 {
		n = len(vecs) / dims
	}
	nlist := opt.Lists
	if nlist <= 0 {
		nlist = int(math.Sqrt(float64(n)))
	}
	nlist = max(1, min(nlist, n))
	iters := opt.Iterations
	if iters <= 0 {
		iters = 8
	}
	sample := opt.Sample
	if sample <= 0 {
		sample = 64 * nlist
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	ix := &IVF{dims: dims, nlist: nlist, centroids: make([]float32, nlist*dims)}
	if n == 0 {
		ix.lists = make([][]int32, nlist)
		return ix
	}
	unit := func(i int, dst []float32) {
		v := vecs[i*dims : (i+1)*dims]
		var s float64
		for _, x := range v {
			s += float64(x) * float64(x)
		}
		inv := float32(0)
		if s > 0 {
			inv = float32(1 / math.Sqrt(s))
		}
		for j, x := range v {
			dst[j] = x * inv
		}
	}
	// Training sample, as unit vectors.
	perm := rng.Perm(n)
	if len(perm) > sample {
		perm = perm[:sample]
	}
	train := make([]float32, len(perm)*dims)
	for k, i := range perm {
		unit(i, train[k*dims:(k+1)*dims])
	}
	for c := 0; c < nlist; c++ {
		copy(ix.centroids[c*dims:(c+1)*dims], train[(c%len(perm))*dims:])
	}
	assign := make([]int, len(perm))
	sums := make([]float64, nlist*dims)
	counts := make([]int, nlist)
	for it := 0; it < iters; it++ {
		for k := range perm {
			assign[k] = ix.nearest(train[k*dims : (k+1)*dims])
		}
		clear(sums)
		clear(counts)
		for k, c := range assign {
			counts[c]++
			for j, x := range train[k*dims : (k+1)*dims] {
				sums[c*dims+j] += float64(x)
			}
		}
		for c := 0; c < nlist; c++ {
			cen := ix.centroids[c*dims : (c+1)*dims]
			if counts[c] == 0 {
				// An empty cluster restarts at a random training vector.
				k := rng.IntN(len(perm))
				copy(cen, train[k*dims:(k+1)*dims])
				continue
			}
			var s float64
			for j := range cen {
				s += sums[c*dims+j] * sums[c*dims+j]
			}
			s = math.Sqrt(s)
			for j := range cen {
				cen[j] = float32(sums[c*dims+j] / s)
			}
		}
	}
	ix.lists = make([][]int32, nlist)
	buf := make([]float32, dims)
	for i := 0; i < n; i++ {
		unit(i, buf)
		c := ix.nearest(buf)
		ix.lists[c] = append(ix.lists[c], int32(i))
	}
	return ix
}

// nearest is the cluster whose centroid has the largest dot product with u.
func (ix *IVF) nearest(u []float32) int {
	best, bestDot := 0, float32(math.Inf(-1))
	for c := 0; c < ix.nlist; c++ {
		d := Dot(ix.centroids[c*ix.dims:(c+1)*ix.dims], u)
		if d > bestDot {
			best, bestDot = c, d
		}
	}
	return best
}

// Grouped returns an order of the vectors that puts the members of each
// cluster next to each other (order[k] is the number of the vector to place
// at position k; within a cluster, vectors keep their relative order) and
// an index over the vectors rearranged that way. Scoring a cluster then
// reads one contiguous stretch of memory instead of vectors scattered over
// the whole set, which at tens of thousands of vectors is several times
// faster. The grouped index has the same centroids, so it picks the same
// clusters for a query as ix.
func (ix *IVF) Grouped() (order []int32, grouped *IVF) {
	n := 0
	for _, l := range ix.lists {
		n += len(l)
	}
	order = make([]int32, 0, n)
	grouped = &IVF{dims: ix.dims, nlist: ix.nlist, centroids: ix.centroids, lists: make([][]int32, len(ix.lists))}
	for c, l := range ix.lists {
		start := int32(len(order))
		order = append(order, l...)
		pos := make([]int32, len(l))
		for k := range pos {
			pos[k] = start + int32(k)
		}
		grouped.lists[c] = pos
	}
	return order, grouped
}

// Lists is the number of clusters.
func (ix *IVF) Lists() int { return ix.nlist }

// Candidates calls fn with every vector number of the nprobe clusters
// nearest to q, nearest cluster first.
func (ix *IVF) Candidates(q []float32, nprobe int, fn func(i int32)) {
	if len(q) != ix.dims || ix.nlist == 0 {
		return
	}
	type cd struct {
		c int
		d float32
	}
	cs := make([]cd, ix.nlist)
	for c := range cs {
		cs[c] = cd{c, Dot(ix.centroids[c*ix.dims:(c+1)*ix.dims], q)}
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].d > cs[b].d })
	for _, x := range cs[:min(max(nprobe, 1), len(cs))] {
		for _, i := range ix.lists[x.c] {
			fn(i)
		}
	}
}

// Dot is the dot product of two vectors of the same length, four lanes at
// a time so that the additions do not wait on each other.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(a); j += 4 {
		s0 += a[j] * b[j]
		s1 += a[j+1] * b[j+1]
		s2 += a[j+2] * b[j+2]
		s3 += a[j+3] * b[j+3]
	}
	for ; j < len(a); j++ {
		s0 += a[j] * b[j]
	}
	return (s0 + s1) + (s2 + s3)
}
