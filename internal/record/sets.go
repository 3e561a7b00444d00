package record

import "slices"

// StatusSet is a set of statuses; a Filter holding one stays comparable.
type StatusSet uint8

// StatusesOf is the set of ss.
func StatusesOf(ss ...Status) StatusSet {
	var out StatusSet
	for _, st := range ss {
		if i := slices.Index(Statuses, st); i >= 0 {
			out |= 1 << i
		}
	}
	return out
}

// Has reports whether st is in s.
func (s StatusSet) Has(st Status) bool {
	i := slices.Index(Statuses, st)
	return i >= 0 && s&(1<<i) != 0
}

// List is s in lifecycle order.
func (s StatusSet) List() []Status {
	var out []Status
	for i, st := range Statuses {
		if s&(1<<i) != 0 {
			out = append(out, st)
		}
	}
	return out
}

func (s StatusSet) orAll() StatusSet {
	if s == 0 {
		return 1<<len(Statuses) - 1
	}
	return s
}

// WaitingSet is a set of waiting reasons (WaitingReasons).
type WaitingSet uint8

// WaitingOf is the set of reasons; ok is false when one is not a reason.
func WaitingOf(reasons ...string) (set WaitingSet, ok bool) {
	for _, r := range reasons {
		i := slices.Index(WaitingReasons, r)
		if i < 0 {
			return 0, false
		}
		set |= 1 << i
	}
	return set, true
}

// Has reports whether reason is in s.
func (s WaitingSet) Has(reason string) bool {
	i := slices.Index(WaitingReasons, reason)
	return i >= 0 && s&(1<<i) != 0
}
