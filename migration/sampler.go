package migration

// sampler keeps bounded examples of each kind of difference: the first
// exampleLimit of each kind in memory (they go in snapshots, checkpoints and
// the verdict), and the first storeLimit of each kind handed to the store at
// the next checkpoint (for the console's paginated list and export).
type sampler struct {
	exampleLimit int
	storeLimit   int
	examples     [numKinds][]Difference
	stored       [numKinds]int64 // handed to the store (saved or in unsaved)
	unsaved      []Difference    // not yet written to the store
}

func (s *sampler) want(k Kind) bool {
	i := k.index()
	return len(s.examples[i]) < s.exampleLimit || s.stored[i] < int64(s.storeLimit)
}

func (s *sampler) add(d Difference) {
	i := d.Kind.index()
	if len(s.examples[i]) < s.exampleLimit {
		s.examples[i] = append(s.examples[i], d)
	}
	if s.stored[i] < int64(s.storeLimit) {
		s.stored[i]++
		s.unsaved = append(s.unsaved, d)
	}
}

func (s *sampler) examplesCopy() map[Kind][]Difference {
	var m map[Kind][]Difference
	for i, ex := range s.examples {
		if len(ex) == 0 {
			continue
		}
		if m == nil {
			m = make(map[Kind][]Difference)
		}
		m[Kinds[i]] = append([]Difference(nil), ex...)
	}
	return m
}
