package projection

import (
	"encoding/binary"
	"hash/maphash"
)

// shapeSeed seeds this process's shape fingerprints. Nobody outside the
// process knows it, so no object can be written to collide with another.
var shapeSeed = maphash.MakeSeed()

// shapeOf fingerprints what sameShape compares — uid, owner uids, a Pod's
// labels, a Deployment's selector — so that a new version of an object is
// checked against the entry alone, without reading the old version (cold
// in memory on a large fleet). Two versions of different shape share a
// fingerprint with probability 2^-64. Kinds that always take the full path
// have none (0).
func shapeOf(o *Object) uint64 {
	switch o.Kind {
	case KindMiddleware, KindIngressRoute, KindCDApplication, KindAppProject:
		return 0
	}
	var h maphash.Hash
	h.SetSeed(shapeSeed)
	var n [8]byte
	str := func(s string) {
		h.Write(binary.LittleEndian.AppendUint64(n[:0], uint64(len(s))))
		h.WriteString(s)
	}
	str(o.UID)
	h.Write(binary.LittleEndian.AppendUint64(n[:0], uint64(len(o.Owners))))
	for _, ow := range o.Owners {
		str(ow.UID)
	}
	var labels Labels
	switch o.Kind {
	case KindPod:
		labels = o.Labels
	case KindDeployment:
		sel := deploymentSelector(o)
		if sel.Invalid {
			h.WriteByte(1)
		}
		for _, r := range sel.Expressions {
			h.WriteByte(2)
			str(r.Key)
			str(r.Operator)
			for _, v := range r.Values {
				h.WriteByte(3)
				str(v)
			}
		}
		labels = sel.MatchLabels
	}
	for _, l := range labels {
		h.WriteByte(4)
		str(l.Key)
		str(l.Value)
	}
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}
