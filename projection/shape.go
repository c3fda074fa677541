package projection

import "hash/maphash"

// fingerprintSeed seeds this process's fingerprints of shapes and images.
// Nobody outside the process knows it, so no object can be written to
// collide with another.
var fingerprintSeed = maphash.MakeSeed()

// shapeOf fingerprints an object's shape: what decides where it sits in the
// trees — its uid, its owners' uids, and what selection reads: a Pod's
// labels, a Deployment's selector. A new version of the same shape leaves
// every tree as it was built (an App's tree reads only its uid and name, so
// any new version of an App keeps the shape); the site, CD and project kinds
// always take the full path and have no fingerprint (0). Apply compares a new
// version's fingerprint with the one its entry holds, without reading the
// old version (cold in memory on a large fleet). Each string is hashed whole
// with the seed, tagged with its part, and folded in order through a
// bijective mixer: two versions of different shape share a fingerprint with
// probability about 2^-64.
func shapeOf(o *Object) uint64 {
	switch o.Kind {
	case KindMiddleware, KindIngressRoute, KindCDApplication, KindAppProject:
		return 0
	}
	h := uint64(0x9e3779b97f4a7c15)
	add := func(tag uint64, s string) { h = mix64(h ^ tag ^ maphash.String(fingerprintSeed, s)) }
	mark := func(tag uint64) { h = mix64(h ^ tag) }
	add(1, o.UID)
	for _, ow := range o.Owners {
		add(2, ow.UID)
	}
	var labels Labels
	switch o.Kind {
	case KindPod:
		labels = o.Labels
	case KindDeployment:
		sel := deploymentSelector(o)
		if sel.Invalid {
			mark(3)
		}
		for _, r := range sel.Expressions {
			add(4, r.Key)
			add(5, r.Operator)
			for _, v := range r.Values {
				add(6, v)
			}
		}
		labels = sel.MatchLabels
	}
	for _, l := range labels {
		add(7, l.Key)
		add(8, l.Value)
	}
	mark(9)
	if h == 0 {
		return 1
	}
	return h
}

// mix64 is the finalizer of SplitMix64: a bijection of 64-bit words that
// spreads every input bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
