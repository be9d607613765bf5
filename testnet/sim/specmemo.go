package sim

import (
	"sync"

	"github.com/gleaner-net/gleaner/auction"
)

// specMemo remembers parsed job specs by their bytes. A round sends the
// same bytes to K providers and the renter reads them too, round after
// round; parsing YAML is most of what a quote would cost otherwise. The
// parse is a pure function of the bytes, so the memo changes nothing
// but the time. Bounded: it starts over past memoLimit entries.
type specMemo struct {
	mu     sync.Mutex
	m      map[string]memoSpec
	hashes map[*auction.JobSpec][]byte
}

type memoSpec struct {
	spec *auction.JobSpec
	err  error
}

const memoLimit = 20_000

func (c *specMemo) parse(b []byte) (*auction.JobSpec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.m[string(b)]; ok {
		return got.spec, got.err
	}
	if c.m == nil || len(c.m) >= memoLimit {
		c.m, c.hashes = map[string]memoSpec{}, map[*auction.JobSpec][]byte{}
	}
	s, err := auction.ParseJobSpec(b)
	c.m[string(b)] = memoSpec{s, err}
	return s, err
}

// hash is auction.SpecHash, remembered for the specs parse returned (a
// spec is never modified once parsed, here or in the code it feeds).
func (c *specMemo) hash(s *auction.JobSpec) ([]byte, error) {
	c.mu.Lock()
	h, ok := c.hashes[s]
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := auction.SpecHash(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.hashes != nil {
		c.hashes[s] = h
	}
	c.mu.Unlock()
	return h, nil
}
